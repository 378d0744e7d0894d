-- A case version may declare the domains its runs are rated on (a JSON list of slugs; null when
-- it declares none). A reviewer's own domains, named by their last review of a version that
-- declares none, are remembered per account so the next review offers them (decision 0052).
alter table test_case_versions add column review_domains text;

create table account_review_domains (
    account_id text primary key references accounts (id),
    domains text not null,
    updated_at bigint not null
);
