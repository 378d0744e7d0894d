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
