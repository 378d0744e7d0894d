//! What a check's commands said, read as the check's result: the rule of each check that runs a
//! command in the Sandbox (the spec's check table). The activity runs the commands and keeps their
//! output; these functions alone decide what it means.
//!
//! - `build` (`bun run typecheck`) and `unit` (`bun test`): exit 0 passes, anything else fails
//!   with the command's last lines.
//! - `security` (`bun test --test-name-pattern authorization`): "no matching test is a gap", a
//!   pass with no signal, never a failure.
//! - `performance` (`bun run bench`): the last `p95Ms` the bench printed, against the limit.
//! - `contract` (`bun run contract` on the base and on the Candidate): the two route tables
//!   compared with the declared contract changes.
//! - `preview-smoke`: `GET /` below 400 and `GET /api/health` 200.
//!
//! A command that ran out of time is an `error` that checked nothing, whatever it printed.

use crate::contract::{BaseTable, compare_route_tables, parse_contract_changes, read_route_tables};
use crate::evidence::{CheckResult, Coverage, EvidenceStatus, Metric};
use crate::plan::P95_METRIC;

/// How many characters of a failed command's output its summary quotes (the Evidence object
/// keeps more).
pub const SUMMARY_TAIL: usize = 300;

/// How one command ended, as a check reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended<'a> {
    /// The command as the policy gives it.
    pub command: &'a str,
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    /// Its standard output.
    pub stdout: &'a str,
    /// The tail of its standard output and error together.
    pub output: &'a str,
}

/// The last `n` characters of `s`.
pub fn tail(s: &str, n: usize) -> String {
    let count = s.chars().count();
    s.chars().skip(count.saturating_sub(n)).collect()
}

/// A command that ran out of time: `error`, `not_checked`.
fn timed_out(ended: &Ended<'_>, timeout_secs: u64) -> CheckResult {
    CheckResult::new(
        EvidenceStatus::Error,
        Coverage::NotChecked,
        &format!("{} timed out after {timeout_secs} s", ended.command),
    )
}

/// By the exit code: passed on 0, else failed with the last lines, which say why.
fn by_exit(ended: &Ended<'_>) -> CheckResult {
    CheckResult::from_command(ended.exit_code, ended.command, &tail(ended.output.trim(), SUMMARY_TAIL))
}

/// `build` and `unit`: the exit code.
pub fn read_exit(ended: &Ended<'_>, timeout_secs: u64) -> CheckResult {
    if ended.timed_out {
        timed_out(ended, timeout_secs)
    } else {
        by_exit(ended)
    }
}

/// `security`: the exit code, except that a run which matched no test named `authorization` is the
/// spec's gap (`pass`, `checked_no_signal`), not a failure.
pub fn read_security(ended: &Ended<'_>, timeout_secs: u64) -> CheckResult {
    if ended.timed_out {
        timed_out(ended, timeout_secs)
    } else if ended.exit_code != Some(0)
        && (ended.output.contains("matched 0 tests") || ended.output.contains("0 tests"))
    {
        CheckResult::new(
            EvidenceStatus::Pass,
            Coverage::CheckedNoSignal,
            "no test named authorization: the denial rules are not tested",
        )
    } else {
        by_exit(ended)
    }
}

/// The last `p95Ms` a bench printed: the last line of its standard output that is a JSON object
/// with a numeric `p95Ms`.
pub fn last_p95(stdout: &str) -> Option<f64> {
    stdout
        .lines()
        .rev()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l.trim()).ok())
        .find_map(|v| v.get(P95_METRIC).and_then(serde_json::Value::as_f64))
}

/// `performance`: a bench that failed fails; one that printed a p95 passes with it as the metric
/// (the gate compares it with `limit`); one that printed none passes with no signal.
pub fn read_performance(ended: &Ended<'_>, timeout_secs: u64, limit: Option<f64>) -> CheckResult {
    if ended.timed_out {
        return timed_out(ended, timeout_secs);
    }
    if ended.exit_code != Some(0) {
        return by_exit(ended);
    }
    match last_p95(ended.stdout) {
        Some(value) => {
            let mut r = CheckResult::new(
                EvidenceStatus::Pass,
                Coverage::CheckedSupported,
                &format!("p95 {value} ms (limit {} ms)", limit.unwrap_or_default()),
            );
            r.metric = Some(Metric {
                name: P95_METRIC.into(),
                value,
                limit,
            });
            r
        }
        None => CheckResult::new(
            EvidenceStatus::Pass,
            Coverage::CheckedNoSignal,
            "the bench printed no p95Ms",
        ),
    }
}

/// The marker the base's side of the contract check prints when the base has no contract script.
pub const NO_SCRIPT_MARKER: &str = "BELAY_NO_SCRIPT";

/// How the base's side of the contract check ended: its table, or that it ran out of time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BaseEnded<'a> {
    pub exit_code: Option<i64>,
    pub timed_out: bool,
    pub stdout: &'a str,
}

impl<'a> BaseEnded<'a> {
    /// Whether the base had no contract script (it printed [`NO_SCRIPT_MARKER`] and exited 0).
    pub fn no_script(&self) -> bool {
        self.exit_code == Some(0) && self.stdout.trim() == NO_SCRIPT_MARKER
    }

    fn table(&self) -> BaseTable<'a> {
        if self.no_script() {
            BaseTable::NoScript
        } else {
            BaseTable::Ran {
                exit_code: self.exit_code,
                stdout: self.stdout,
            }
        }
    }
}

/// `contract`: both route tables read (a side that failed fails the check, naming it), then
/// compared with the declared contract changes: every change declared and none undeclared
/// passes.
pub fn read_contract<S: AsRef<str>>(
    candidate: &Ended<'_>,
    base: &BaseEnded<'_>,
    contract_changes: &[S],
    timeout_secs: u64,
) -> CheckResult {
    if candidate.timed_out || base.timed_out {
        return timed_out(candidate, timeout_secs);
    }
    match read_route_tables(candidate.stdout, candidate.exit_code, &base.table()) {
        Ok((cand, base)) => {
            let cmp = compare_route_tables(&base, &cand, &parse_contract_changes(contract_changes));
            let status = if cmp.passes() {
                EvidenceStatus::Pass
            } else {
                EvidenceStatus::Fail
            };
            CheckResult::new(status, Coverage::CheckedSupported, &cmp.summary())
        }
        Err(why) => CheckResult::new(EvidenceStatus::Fail, Coverage::CheckedSupported, &why),
    }
}

/// `preview-smoke`, from the probe's last line (`root=<status> health=<status>`, a status left
/// empty when the request got no answer): `GET /` below 400 and `GET /api/health` 200 pass.
pub fn read_preview(probes: &str) -> CheckResult {
    let code = |k: &str| {
        probes
            .split_whitespace()
            .find_map(|p| p.strip_prefix(k))
            .and_then(|v| v.parse::<u16>().ok())
    };
    let (root, health) = (code("root="), code("health="));
    let ok = root.is_some_and(|r| r < 400) && health == Some(200);
    CheckResult::new(
        if ok { EvidenceStatus::Pass } else { EvidenceStatus::Fail },
        Coverage::CheckedSupported,
        &format!("GET / answered {root:?}, GET /api/health answered {health:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended<'a>(command: &'a str, exit: Option<i64>, stdout: &'a str, output: &'a str) -> Ended<'a> {
        Ended {
            command,
            exit_code: exit,
            timed_out: false,
            stdout,
            output,
        }
    }

    #[test]
    fn build_and_unit_pass_on_exit_zero_and_fail_with_the_last_lines() {
        let r = read_exit(&ended("bun test", Some(0), "", "3 pass"), 180);
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Pass, Coverage::CheckedSupported)
        );
        let r = read_exit(&ended("bun test", Some(1), "", "lots\n1 fail\n"), 180);
        assert_eq!(r.status, EvidenceStatus::Fail);
        assert!(
            r.summary.contains("bun test failed (exit 1): lots | 1 fail"),
            "{}",
            r.summary
        );
        // The summary quotes only the tail of a long output.
        let long = format!("{}END", "x".repeat(5000));
        let r = read_exit(&ended("bun test", Some(1), "", &long), 180);
        assert!(r.summary.contains("END") && r.summary.len() < 1000, "{}", r.summary);
    }

    #[test]
    fn a_command_out_of_time_checked_nothing_whatever_it_printed() {
        let mut e = ended("bun run typecheck", Some(137), "", "");
        e.timed_out = true;
        for r in [
            read_exit(&e, 120),
            read_security(&e, 120),
            read_performance(&e, 120, Some(50.0)),
        ] {
            assert_eq!((r.status, r.coverage), (EvidenceStatus::Error, Coverage::NotChecked));
            assert!(
                r.summary.contains("bun run typecheck timed out after 120 s"),
                "{}",
                r.summary
            );
        }
    }

    /// "No matching test is a gap": a pass without signal, not a failure.
    #[test]
    fn security_without_a_matching_test_is_a_gap_not_a_failure() {
        let cmd = "bun test --test-name-pattern authorization";
        let r = read_security(
            &ended(cmd, Some(1), "", "error: regex \"authorization\" matched 0 tests"),
            180,
        );
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Pass, Coverage::CheckedNoSignal)
        );
        let r = read_security(&ended(cmd, Some(0), "", "2 pass"), 180);
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Pass, Coverage::CheckedSupported)
        );
        let r = read_security(&ended(cmd, Some(1), "", "1 fail: denies a stranger"), 180);
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Fail, Coverage::CheckedSupported)
        );
    }

    /// "Metric p95Ms must be below the limit": the last p95 printed is the metric.
    #[test]
    fn performance_reads_the_last_p95_the_bench_printed() {
        let out = "warming up\n{\"p95Ms\": 80}\nnoise\n{\"p95Ms\": 42.5, \"p50Ms\": 10}\n";
        assert_eq!(last_p95(out), Some(42.5));
        let r = read_performance(&ended("bun run bench", Some(0), out, out), 120, Some(50.0));
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Pass, Coverage::CheckedSupported)
        );
        let m = r.metric.unwrap();
        assert_eq!((m.name.as_str(), m.value, m.limit), (P95_METRIC, 42.5, Some(50.0)));

        let r = read_performance(&ended("bun run bench", Some(0), "done\n", ""), 120, Some(50.0));
        assert_eq!(
            (r.status, r.coverage),
            (EvidenceStatus::Pass, Coverage::CheckedNoSignal)
        );
        assert!(r.metric.is_none());
        let r = read_performance(&ended("bun run bench", Some(2), out, "crash"), 120, Some(50.0));
        assert_eq!(r.status, EvidenceStatus::Fail);
        assert!(r.metric.is_none());
        assert_eq!(last_p95("{\"p95Ms\": \"fast\"}\n[1]\n"), None);
    }

    #[test]
    fn contract_compares_both_tables_with_the_declared_changes() {
        let base_out = r#"[{"method":"GET","path":"/api/health"}]"#;
        let cand_out = r#"[{"method":"GET","path":"/api/health"},{"method":"GET","path":"/api/notes"}]"#;
        let base = BaseEnded {
            exit_code: Some(0),
            timed_out: false,
            stdout: base_out,
        };
        let cand = ended("bun run contract", Some(0), cand_out, "");
        let none: [&str; 0] = [];
        let undeclared = read_contract(&cand, &base, &none, 120);
        let declared = read_contract(&cand, &base, &["Adds GET /api/notes"], 120);
        assert_eq!(undeclared.status, EvidenceStatus::Fail, "{}", undeclared.summary);
        assert_eq!(declared.status, EvidenceStatus::Pass, "{}", declared.summary);

        // A base with no contract script has no routes: the Candidate's are all additions.
        let no_script = BaseEnded {
            exit_code: Some(0),
            timed_out: false,
            stdout: "BELAY_NO_SCRIPT\n",
        };
        assert!(no_script.no_script());
        let first = ended("bun run contract", Some(0), "[]", "");
        assert_eq!(
            read_contract(&first, &no_script, &none, 120).status,
            EvidenceStatus::Pass
        );

        // A side that failed fails the check and is named.
        let broken = ended("bun run contract", Some(1), "", "boom");
        let r = read_contract(&broken, &base, &none, 120);
        assert_eq!(r.status, EvidenceStatus::Fail);
        assert!(r.summary.contains("Candidate"), "{}", r.summary);

        let slow_base = BaseEnded {
            timed_out: true,
            ..base
        };
        assert_eq!(
            read_contract(&cand, &slow_base, &none, 120).status,
            EvidenceStatus::Error
        );
    }

    /// "GET / answers below 400" and "GET /api/health … answers 200".
    #[test]
    fn the_preview_passes_with_a_root_below_400_and_a_healthy_health() {
        assert_eq!(read_preview("root=200 health=200").status, EvidenceStatus::Pass);
        assert_eq!(read_preview("root=302 health=200").status, EvidenceStatus::Pass);
        assert_eq!(read_preview("root=404 health=200").status, EvidenceStatus::Fail);
        assert_eq!(read_preview("root=200 health=503").status, EvidenceStatus::Fail);
        let r = read_preview("root= health=");
        assert_eq!(r.status, EvidenceStatus::Fail);
        assert!(r.summary.contains("GET / answered None"), "{}", r.summary);
        assert_eq!(read_preview("").status, EvidenceStatus::Fail);
    }

    #[test]
    fn the_tail_counts_characters_not_bytes() {
        assert_eq!(tail("héllo", 3), "llo");
        assert_eq!(tail("ab", 5), "ab");
        assert_eq!(tail("ééé", 2), "éé");
    }
}
