//! Reviews: a rating per domain for a standard run, a category for a game-jam run.
//!
//! A run's displayed rating is the worst domain across every reviewer, and a game-jam run's
//! displayed category the worst category across every reviewer. Nothing that gates or buffers may
//! read either: those read one account's own review.

use crate::catalogue::TestType;
use crate::validation::{ValidationError, check_slug, check_text};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

/// A domain rating, worst first: `broken < scuffed < passable < great < flawless`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum Rating {
    Broken,
    Scuffed,
    Passable,
    Great,
    Flawless,
}

/// The game-jam category scale, 💩 (worst) to 💎 (best).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JamCategory {
    /// 💩
    Poop,
    /// 🧱
    Brick,
    /// 🥈
    Silver,
    /// 🥇
    Gold,
    /// 💎
    Diamond,
}

/// A review as submitted: `ratings` for a standard run, `category` for a game-jam run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ReviewInput {
    #[serde(default)]
    pub ratings: Option<BTreeMap<String, Rating>>,
    #[serde(default)]
    pub category: Option<JamCategory>,
    #[serde(default)]
    pub note: Option<String>,
}

impl ReviewInput {
    /// Checks the review on its own: a note within bounds, and exactly one of `ratings` (1 to 32
    /// domains) or `category`.
    pub fn validate(&self) -> Result<(), ValidationError> {
        if let Some(n) = &self.note {
            check_text("note", n, 10_000)?;
        }
        match (&self.ratings, &self.category) {
            (Some(_), Some(_)) => Err(ValidationError::new(
                "category",
                "a review gives domain ratings or a category, not both",
            )),
            (None, None) => Err(ValidationError::new(
                "ratings",
                "a review needs domain ratings (a standard run) or a category (a game-jam run)",
            )),
            (Some(r), None) => {
                if r.is_empty() || r.len() > 32 {
                    return Err(ValidationError::new("ratings", "must rate 1 to 32 domains"));
                }
                for d in r.keys() {
                    check_slug(&format!("ratings.{d}"), d, 64)?;
                }
                Ok(())
            }
            (None, Some(_)) => Ok(()),
        }
    }

    /// Whether a run of `test_type` takes this kind of review: ratings for a standard run, a
    /// category for a game-jam run, none for a performance run. The error names the field.
    pub fn fits(&self, test_type: TestType) -> Result<(), ValidationError> {
        match test_type {
            TestType::Performance => Err(ValidationError::new(
                "runId",
                "performance runs are graded by machine and take no review",
            )),
            TestType::GameJam if self.ratings.is_some() => Err(ValidationError::new(
                "ratings",
                "a game-jam run is reviewed with a category, not domain ratings",
            )),
            TestType::Standard if self.category.is_some() => {
                Err(ValidationError::new("category", "only a game-jam run takes a category"))
            }
            _ => Ok(()),
        }
    }

    /// Both checks, in order.
    pub fn validate_for(&self, test_type: TestType) -> Result<(), ValidationError> {
        self.validate()?;
        self.fits(test_type)
    }
}

/// The domain a reviewer rates when neither the case version nor their own past reviews name one.
pub const DEFAULT_DOMAIN: &str = "overall";

/// Where the domains offered for a review come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum DomainSource {
    /// The run's case version declares them (`reviewDomains`).
    CaseVersion,
    /// The reviewer's own domains, as their last review of an undeclared version named them.
    Remembered,
    /// Neither: the one domain `overall`.
    Default,
    /// A game-jam or performance run: it takes no domain ratings.
    None,
}

/// The domains a review of a run is offered, and where they come from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct OfferedDomains {
    pub domains: Vec<String>,
    pub source: DomainSource,
}

/// What a review of a run of `test_type` offers: the version's declared domains when it declares
/// them, else the reviewer's remembered ones, else `overall`; nothing for a run rated otherwise.
/// Free domains stay possible: a review may rate domains beyond those offered.
pub fn offered_domains(
    test_type: TestType,
    declared: Option<&[String]>,
    remembered: Option<&[String]>,
) -> OfferedDomains {
    let (domains, source) = match (test_type, declared, remembered) {
        (TestType::GameJam | TestType::Performance, _, _) => (vec![], DomainSource::None),
        (_, Some(d), _) if !d.is_empty() => (d.to_vec(), DomainSource::CaseVersion),
        (_, _, Some(r)) if !r.is_empty() => (r.to_vec(), DomainSource::Remembered),
        _ => (vec![DEFAULT_DOMAIN.to_string()], DomainSource::Default),
    };
    OfferedDomains { domains, source }
}

/// The domains a submitted review leaves remembered for its reviewer: the ones it rated, when the
/// run's version declares none (declared domains belong to that version, not to the reviewer).
pub fn domains_to_remember(declared: Option<&[String]>, input: &ReviewInput) -> Option<Vec<String>> {
    match (declared, &input.ratings) {
        (Some(d), _) if !d.is_empty() => None,
        (_, Some(r)) if !r.is_empty() => Some(r.keys().cloned().collect()),
        _ => None,
    }
}

/// The worst domain of one review.
pub fn worst_domain(ratings: &BTreeMap<String, Rating>) -> Option<Rating> {
    ratings.values().copied().min()
}

/// A run's displayed rating: the worst domain across every reviewer's review.
pub fn displayed_rating<'a>(reviews: impl IntoIterator<Item = &'a BTreeMap<String, Rating>>) -> Option<Rating> {
    reviews.into_iter().filter_map(worst_domain).min()
}

/// A game-jam run's displayed category: the worst category across every reviewer's review.
pub fn displayed_category(categories: impl IntoIterator<Item = JamCategory>) -> Option<JamCategory> {
    categories.into_iter().min()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(pairs: &[(&str, Rating)]) -> BTreeMap<String, Rating> {
        pairs.iter().map(|(d, r)| (d.to_string(), *r)).collect()
    }

    #[test]
    fn ratings_order_from_broken_to_flawless() {
        assert!(Rating::Broken < Rating::Scuffed && Rating::Great < Rating::Flawless);
    }

    #[test]
    fn the_displayed_rating_is_the_worst_domain_across_every_reviewer() {
        let a = r(&[("gameplay", Rating::Great), ("visuals", Rating::Passable)]);
        let b = r(&[("gameplay", Rating::Scuffed)]);
        assert_eq!(displayed_rating([&a]), Some(Rating::Passable));
        assert_eq!(displayed_rating([&a, &b]), Some(Rating::Scuffed));
        assert_eq!(displayed_rating(Vec::<&BTreeMap<String, Rating>>::new()), None);
    }

    #[test]
    fn the_displayed_category_is_the_worst_across_every_reviewer() {
        assert!(JamCategory::Poop < JamCategory::Brick && JamCategory::Gold < JamCategory::Diamond);
        assert_eq!(
            displayed_category([JamCategory::Gold, JamCategory::Brick, JamCategory::Diamond]),
            Some(JamCategory::Brick)
        );
        assert_eq!(displayed_category([]), None);
    }

    #[test]
    fn a_review_gives_ratings_or_a_category_never_both_nor_neither() {
        let both = ReviewInput {
            ratings: Some(r(&[("gameplay", Rating::Great)])),
            category: Some(JamCategory::Gold),
            note: None,
        };
        assert_eq!(both.validate().unwrap_err().field, "category");
        let neither = ReviewInput {
            ratings: None,
            category: None,
            note: None,
        };
        assert_eq!(neither.validate().unwrap_err().field, "ratings");
    }

    #[test]
    fn a_review_is_offered_the_versions_domains_else_the_reviewers_own_else_overall() {
        let declared = vec!["gameplay".to_string(), "visuals".to_string()];
        let mine = vec!["feel".to_string()];
        let o = offered_domains(TestType::Standard, Some(&declared), Some(&mine));
        assert_eq!((o.domains, o.source), (declared.clone(), DomainSource::CaseVersion));
        let o = offered_domains(TestType::Standard, None, Some(&mine));
        assert_eq!((o.domains, o.source), (mine.clone(), DomainSource::Remembered));
        let o = offered_domains(TestType::Standard, None, None);
        assert_eq!(
            (o.domains, o.source),
            (vec!["overall".to_string()], DomainSource::Default)
        );
        let o = offered_domains(TestType::GameJam, Some(&declared), Some(&mine));
        assert_eq!((o.domains.len(), o.source), (0, DomainSource::None));
    }

    #[test]
    fn only_a_review_of_an_undeclared_version_is_remembered() {
        let input = ReviewInput {
            ratings: Some(r(&[("visuals", Rating::Great), ("feel", Rating::Scuffed)])),
            category: None,
            note: None,
        };
        assert_eq!(
            domains_to_remember(None, &input),
            Some(vec!["feel".to_string(), "visuals".to_string()])
        );
        assert_eq!(domains_to_remember(Some(&["gameplay".to_string()]), &input), None);
        let jam = ReviewInput {
            ratings: None,
            category: Some(JamCategory::Gold),
            note: None,
        };
        assert_eq!(domains_to_remember(None, &jam), None);
    }

    #[test]
    fn a_game_jam_run_takes_a_category_and_no_ratings() {
        let jam = ReviewInput {
            ratings: None,
            category: Some(JamCategory::Gold),
            note: None,
        };
        assert!(jam.validate_for(TestType::GameJam).is_ok());
        assert_eq!(jam.validate_for(TestType::Standard).unwrap_err().field, "category");
        let std = ReviewInput {
            ratings: Some(r(&[("gameplay", Rating::Great)])),
            category: None,
            note: None,
        };
        assert!(std.validate_for(TestType::Standard).is_ok());
        assert_eq!(std.validate_for(TestType::GameJam).unwrap_err().field, "ratings");
        assert!(std.validate_for(TestType::Performance).is_err());
    }
}
