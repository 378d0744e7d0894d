//! Whether a combination can be launched, and why not.
//!
//! One rule serves a launch by hand (refused with the reason) and, later, the matrix and the
//! top-up (the cell reports the reason and is skipped).

use crate::catalogue::{GgConfigFacts, ModelCatalogue};
use crate::job::Combination;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;

/// Why a combination cannot be launched.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "code", rename_all = "snake_case")]
pub enum Unlaunchable {
    /// The harness is not in the catalogue.
    UnknownHarness { harness: String },
    /// A provider-routed harness needs a provider.
    ProviderRequired { harness: String },
    /// A harness that is not provider-routed takes no provider.
    ProviderNotAccepted { harness: String },
    /// The catalogue cannot resolve a list price for the model.
    ModelUnpriced { model: String },
    /// The account owns no gg configuration with this id.
    GgConfigNotOwned { gg_config_id: String },
    /// The gg configuration was deleted. It keeps its id, so the cells naming it stay countable.
    GgConfigDeleted { gg_config_id: String },
    /// A launch slot of the configuration has no model bound.
    SlotUnbound { slot: String },
    /// A binding names a slot the configuration does not ask for.
    UnknownSlot { slot: String },
    /// The catalogue can resolve no context window for a bound model.
    ModelWithoutContextWindow { model: String },
}

impl Unlaunchable {
    pub fn code(&self) -> &'static str {
        match self {
            Unlaunchable::UnknownHarness { .. } => "unknown_harness",
            Unlaunchable::ProviderRequired { .. } => "provider_required",
            Unlaunchable::ProviderNotAccepted { .. } => "provider_not_accepted",
            Unlaunchable::ModelUnpriced { .. } => "model_unpriced",
            Unlaunchable::GgConfigNotOwned { .. } => "gg_config_not_owned",
            Unlaunchable::GgConfigDeleted { .. } => "gg_config_deleted",
            Unlaunchable::SlotUnbound { .. } => "slot_unbound",
            Unlaunchable::UnknownSlot { .. } => "unknown_slot",
            Unlaunchable::ModelWithoutContextWindow { .. } => "model_without_context_window",
        }
    }

    /// The request field the reason is about.
    pub fn field(&self) -> String {
        match self {
            Unlaunchable::UnknownHarness { .. } => "combination.harness".into(),
            Unlaunchable::ProviderRequired { .. } | Unlaunchable::ProviderNotAccepted { .. } => {
                "combination.provider".into()
            }
            Unlaunchable::ModelUnpriced { .. } => "combination.model".into(),
            Unlaunchable::GgConfigNotOwned { .. } | Unlaunchable::GgConfigDeleted { .. } => {
                "combination.ggConfigId".into()
            }
            Unlaunchable::SlotUnbound { slot } | Unlaunchable::UnknownSlot { slot } => {
                format!("combination.bindings.{slot}")
            }
            Unlaunchable::ModelWithoutContextWindow { .. } => "combination.bindings".into(),
        }
    }
}

impl fmt::Display for Unlaunchable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unlaunchable::UnknownHarness { harness } => write!(f, "harness {harness} is not in the catalogue"),
            Unlaunchable::ProviderRequired { harness } => {
                write!(
                    f,
                    "harness {harness} is provider-routed, so a launch must name a provider"
                )
            }
            Unlaunchable::ProviderNotAccepted { harness } => {
                write!(
                    f,
                    "harness {harness} is not provider-routed, so a launch names no provider"
                )
            }
            Unlaunchable::ModelUnpriced { model } => {
                write!(f, "the catalogue cannot resolve a list price for model {model}")
            }
            Unlaunchable::GgConfigNotOwned { gg_config_id } => {
                write!(f, "no gg configuration {gg_config_id} is owned by this account")
            }
            Unlaunchable::GgConfigDeleted { gg_config_id } => {
                write!(f, "gg configuration {gg_config_id} was deleted")
            }
            Unlaunchable::SlotUnbound { slot } => write!(f, "launch slot {slot} is not bound to a model"),
            Unlaunchable::UnknownSlot { slot } => write!(f, "the configuration has no launch slot {slot}"),
            Unlaunchable::ModelWithoutContextWindow { model } => {
                write!(f, "the catalogue can resolve no context window for model {model}")
            }
        }
    }
}

/// What the launch check knows of the harness a combination names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HarnessFacts {
    pub provider_routed: bool,
}

/// Checks a combination against the catalogue. `harness` is `None` when the harness (or, for
/// gg, the `gg` lane) is not in the catalogue; `gg_config` is `None` when the launching account
/// owns no configuration with that id.
pub fn check_launchable(
    combo: &Combination,
    harness: Option<HarnessFacts>,
    models: &ModelCatalogue,
    gg_config: Option<&GgConfigFacts>,
) -> Result<(), Unlaunchable> {
    match combo {
        Combination::Harness {
            harness: name,
            model,
            provider,
        } => {
            let h = harness.ok_or_else(|| Unlaunchable::UnknownHarness { harness: name.clone() })?;
            match (h.provider_routed, provider) {
                (true, None) => return Err(Unlaunchable::ProviderRequired { harness: name.clone() }),
                (false, Some(_)) => return Err(Unlaunchable::ProviderNotAccepted { harness: name.clone() }),
                _ => {}
            }
            if models.get(model).and_then(|m| m.list_price).is_none() {
                return Err(Unlaunchable::ModelUnpriced { model: model.clone() });
            }
            Ok(())
        }
        Combination::Gg { gg_config_id, bindings } => {
            let cfg = gg_config.ok_or_else(|| Unlaunchable::GgConfigNotOwned {
                gg_config_id: gg_config_id.clone(),
            })?;
            for slot in &cfg.launch_slots {
                if !bindings.contains_key(slot) {
                    return Err(Unlaunchable::SlotUnbound { slot: slot.clone() });
                }
            }
            for slot in bindings.keys() {
                if !cfg.launch_slots.contains(slot) {
                    return Err(Unlaunchable::UnknownSlot { slot: slot.clone() });
                }
            }
            for model in bindings.values() {
                let facts = models.get(model).copied().unwrap_or_default();
                if facts.context_window.is_none() {
                    return Err(Unlaunchable::ModelWithoutContextWindow { model: model.clone() });
                }
                if facts.list_price.is_none() {
                    return Err(Unlaunchable::ModelUnpriced { model: model.clone() });
                }
            }
            if harness.is_none() {
                return Err(Unlaunchable::UnknownHarness {
                    harness: crate::job::GG_HARNESS.into(),
                });
            }
            Ok(())
        }
    }
}

/// A gg configuration of the launching account. A deleted one keeps its id, so the standing
/// members naming it resolve to [`Unlaunchable::GgConfigDeleted`] rather than to "not owned".
#[derive(Debug, Clone, PartialEq)]
pub enum GgConfigEntry {
    Live(GgConfigFacts),
    Deleted,
}

/// What the launch check reads for many combinations at once (a plan's or a ladder's members),
/// loaded by the store in one query per source rather than one per member.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LaunchFacts {
    /// Every harness in the catalogue, the `gg` lane included.
    pub harnesses: BTreeMap<String, HarnessFacts>,
    /// The models the members bind (an absent model has neither a context window nor a price).
    pub models: ModelCatalogue,
    /// The launching account's gg configurations, deleted ones included.
    pub gg_configs: BTreeMap<String, GgConfigEntry>,
}

impl LaunchFacts {
    /// [`check_launchable`] for a standing member, which may name a configuration deleted since
    /// it was authored.
    pub fn check(&self, combo: &Combination) -> Result<(), Unlaunchable> {
        let gg = match combo {
            Combination::Gg { gg_config_id, .. } => match self.gg_configs.get(gg_config_id) {
                Some(GgConfigEntry::Deleted) => {
                    return Err(Unlaunchable::GgConfigDeleted {
                        gg_config_id: gg_config_id.clone(),
                    });
                }
                Some(GgConfigEntry::Live(facts)) => Some(facts),
                None => None,
            },
            Combination::Harness { .. } => None,
        };
        check_launchable(combo, self.harnesses.get(combo.harness()).copied(), &self.models, gg)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::catalogue::{ListPrice, ModelFacts};

    const PRICE: ListPrice = ListPrice {
        input_per_mtok_usd: 3.0,
        output_per_mtok_usd: 15.0,
    };

    /// Models `priced`, `unpriced` (no list price) and `windowless` (no context window).
    pub fn catalogue() -> ModelCatalogue {
        BTreeMap::from([
            (
                "priced".to_string(),
                ModelFacts {
                    context_window: Some(200_000),
                    list_price: Some(PRICE),
                },
            ),
            (
                "unpriced".to_string(),
                ModelFacts {
                    context_window: Some(200_000),
                    list_price: None,
                },
            ),
            (
                "windowless".to_string(),
                ModelFacts {
                    context_window: None,
                    list_price: Some(PRICE),
                },
            ),
        ])
    }

    fn harness(model: &str) -> Combination {
        Combination::Harness {
            harness: "cc".into(),
            model: model.into(),
            provider: None,
        }
    }

    const PLAIN: Option<HarnessFacts> = Some(HarnessFacts { provider_routed: false });

    #[test]
    fn a_harness_member_whose_model_has_no_list_price_is_not_launched() {
        assert!(check_launchable(&harness("priced"), PLAIN, &catalogue(), None).is_ok());
        assert_eq!(
            check_launchable(&harness("unpriced"), PLAIN, &catalogue(), None)
                .unwrap_err()
                .code(),
            "model_unpriced"
        );
        assert_eq!(
            check_launchable(&harness("never-heard-of"), PLAIN, &catalogue(), None)
                .unwrap_err()
                .code(),
            "model_unpriced"
        );
    }

    #[test]
    fn a_provider_routed_harness_needs_a_provider() {
        let routed = Some(HarnessFacts { provider_routed: true });
        assert_eq!(
            check_launchable(&harness("priced"), routed, &catalogue(), None)
                .unwrap_err()
                .code(),
            "provider_required"
        );
        let with = Combination::Harness {
            harness: "cc".into(),
            model: "priced".into(),
            provider: Some("bedrock".into()),
        };
        assert!(check_launchable(&with, routed, &catalogue(), None).is_ok());
        assert_eq!(
            check_launchable(&with, PLAIN, &catalogue(), None).unwrap_err().code(),
            "provider_not_accepted"
        );
    }

    fn gg(bindings: &[(&str, &str)]) -> Combination {
        Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: bindings.iter().map(|(s, m)| (s.to_string(), m.to_string())).collect(),
        }
    }

    fn cfg() -> GgConfigFacts {
        GgConfigFacts {
            name: "x".into(),
            launch_slots: vec!["root".into(), "reviewer".into()],
            capabilities: serde_json::json!({}),
        }
    }

    #[test]
    fn a_gg_member_that_leaves_a_slot_unbound_is_not_launched() {
        let err = check_launchable(&gg(&[("root", "priced")]), PLAIN, &catalogue(), Some(&cfg())).unwrap_err();
        assert_eq!(
            err,
            Unlaunchable::SlotUnbound {
                slot: "reviewer".into()
            }
        );
    }

    #[test]
    fn a_gg_member_binding_a_model_without_context_window_is_not_launched() {
        let err = check_launchable(
            &gg(&[("root", "priced"), ("reviewer", "windowless")]),
            PLAIN,
            &catalogue(),
            Some(&cfg()),
        )
        .unwrap_err();
        assert_eq!(err.code(), "model_without_context_window");
    }

    #[test]
    fn a_gg_member_of_a_config_the_account_does_not_own_is_refused() {
        let err = check_launchable(
            &gg(&[("root", "priced"), ("reviewer", "priced")]),
            PLAIN,
            &catalogue(),
            None,
        )
        .unwrap_err();
        assert_eq!(err.code(), "gg_config_not_owned");
        assert!(
            check_launchable(
                &gg(&[("root", "priced"), ("reviewer", "priced")]),
                PLAIN,
                &catalogue(),
                Some(&cfg())
            )
            .is_ok()
        );
    }

    #[test]
    fn a_member_naming_a_deleted_configuration_reports_it_deleted_not_unowned() {
        let combo = gg(&[("root", "priced"), ("reviewer", "priced")]);
        let mut facts = LaunchFacts {
            harnesses: BTreeMap::from([("gg".to_string(), HarnessFacts { provider_routed: false })]),
            models: catalogue(),
            gg_configs: BTreeMap::from([("gg_1".to_string(), GgConfigEntry::Live(cfg()))]),
        };
        assert_eq!(facts.check(&combo), Ok(()));
        facts.gg_configs.insert("gg_1".into(), GgConfigEntry::Deleted);
        assert_eq!(facts.check(&combo).unwrap_err().code(), "gg_config_deleted");
        facts.gg_configs.clear();
        assert_eq!(facts.check(&combo).unwrap_err().code(), "gg_config_not_owned");
        facts.harnesses.clear();
        assert_eq!(facts.check(&harness("priced")).unwrap_err().code(), "unknown_harness");
    }
}
