//! What a plan or a ladder may spend: a run's cost, the estimate a top-up reserves before it
//! emits a run, and which of a top-up's runs fit under the budget.
//!
//! Money is counted in whole micro-dollars ([`Micros`]), never in floating point: a reservation
//! is a conditional update in the store (`spent + reserved + estimate <= budget`), and sums of
//! integers are exact in both backends and in any order. The API speaks US dollars as numbers;
//! [`Micros::from_usd`] rounds each to the nearest micro-dollar, once, at the edge.

use crate::catalogue::{ListPrice, ModelCatalogue};
use crate::job::Combination;
use crate::validation::ValidationError;
use serde::{Deserialize, Serialize};

/// Input tokens a run is assumed to use when nothing better is known: no completed run of the
/// combination and no `estimatedRunUsd` on the plan. Priced by the model's list price.
pub const DEFAULT_INPUT_TOKENS: i64 = 200_000;
/// Output tokens a run is assumed to use when nothing better is known (see
/// [`DEFAULT_INPUT_TOKENS`]).
pub const DEFAULT_OUTPUT_TOKENS: i64 = 20_000;

/// The largest budget or estimate accepted: a billion dollars, far past any real plan, and far
/// inside `i64` micro-dollars even when thousands of them are summed.
pub const MAX_USD: f64 = 1_000_000_000.0;

/// An amount of US dollars in micro-dollars (10⁻⁶ USD).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
pub struct Micros(pub i64);

impl Micros {
    pub const ZERO: Micros = Micros(0);

    /// `usd` as micro-dollars, or the rule it breaks (for the error that names `field`).
    pub fn from_usd(field: &str, usd: f64) -> Result<Micros, ValidationError> {
        if !usd.is_finite() {
            return Err(ValidationError::new(field, "must be a number of US dollars"));
        }
        if usd < 0.0 {
            return Err(ValidationError::new(field, "must be at least 0"));
        }
        if usd > MAX_USD {
            return Err(ValidationError::new(field, format!("must be at most {MAX_USD}")));
        }
        Ok(Micros((usd * 1_000_000.0).round() as i64))
    }

    /// In US dollars, for answers.
    pub fn usd(self) -> f64 {
        self.0 as f64 / 1_000_000.0
    }

    pub fn saturating_add(self, other: Micros) -> Micros {
        Micros(self.0.saturating_add(other.0))
    }

    /// `runs` runs at `self` each.
    pub fn times(self, runs: i64) -> Micros {
        Micros(self.0.saturating_mul(runs.max(0)))
    }
}

/// Micro-dollars written as a number of US dollars (`#[serde(with = "usd")]`): what the API
/// shows, while the code counts integers.
pub mod usd {
    use super::Micros;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Micros, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(m.usd())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Micros, D::Error> {
        let usd = f64::deserialize(d)?;
        Micros::from_usd("usd", usd).map_err(|e| serde::de::Error::custom(e.rule))
    }

    /// The same for an optional amount (`null` when absent).
    pub mod option {
        use super::Micros;
        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(m: &Option<Micros>, s: S) -> Result<S::Ok, S::Error> {
            match m {
                Some(m) => s.serialize_f64(m.usd()),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Micros>, D::Error> {
            Option::<f64>::deserialize(d)?
                .map(|usd| Micros::from_usd("usd", usd).map_err(|e| serde::de::Error::custom(e.rule)))
                .transpose()
        }
    }
}

/// A plan's or a ladder's budget as the API takes it: `{"usd": n}`; `null` is no budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct BudgetInput {
    pub usd: f64,
}

impl BudgetInput {
    /// The budget in micro-dollars; the error names `budget.usd`.
    pub fn micros(&self) -> Result<Micros, ValidationError> {
        Micros::from_usd("budget.usd", self.usd)
    }

    /// The budget as the API shows it.
    pub fn of(m: Micros) -> BudgetInput {
        BudgetInput { usd: m.usd() }
    }
}

/// The smallest `estimatedRunUsd`: one micro-dollar.
pub const MIN_ESTIMATED_RUN_USD: f64 = 0.000_001;

/// A plan's or a ladder's `estimatedRunUsd` in micro-dollars: at least one micro-dollar (a run
/// estimated to cost nothing would let a budget launch without end); the error names
/// `estimatedRunUsd`.
pub fn estimated_run(usd: f64) -> Result<Micros, ValidationError> {
    let m = Micros::from_usd("estimatedRunUsd", usd)?;
    if usd < MIN_ESTIMATED_RUN_USD {
        return Err(ValidationError::new(
            "estimatedRunUsd",
            format!("must be at least {MIN_ESTIMATED_RUN_USD} (a micro-dollar)"),
        ));
    }
    Ok(m)
}

/// Checks the budget fields a plan or a ladder is saved with: `budget.usd` and `estimatedRunUsd`.
pub fn check_budget_fields(
    budget: Option<&BudgetInput>,
    estimated_run_usd: Option<f64>,
) -> Result<(), ValidationError> {
    if let Some(b) = budget {
        b.micros()?;
    }
    if let Some(e) = estimated_run_usd {
        estimated_run(e)?;
    }
    Ok(())
}

/// Token counts an adapter reports in its manifest (`usage: {inputTokens, outputTokens}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// What an adapter's manifest says a run cost, read from its `costUsd` and `usage` fields (a
/// `costUsd` that is not a valid amount is dropped here, once: [`Reported::from_manifest`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Reported {
    /// The adapter's `costUsd`, in micro-dollars.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Micros>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<Usage>,
}

impl Reported {
    /// From a manifest's `costUsd` and `usage`: a negative, non-finite or absurd `costUsd` is
    /// dropped (the usage, else the estimate, prices the run instead).
    pub fn from_manifest(cost_usd: Option<f64>, usage: Option<Usage>) -> Reported {
        Reported {
            cost: cost_usd.and_then(|usd| Micros::from_usd("costUsd", usd).ok()),
            usage,
        }
    }

    /// Whether the adapter reported nothing.
    pub fn is_empty(&self) -> bool {
        self.cost.is_none() && self.usage.is_none()
    }
}

/// Where a run's settled cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CostBasis {
    /// The adapter's `costUsd`.
    Reported,
    /// The adapter's `usage`, priced by the model's list price.
    Usage,
    /// Nothing usable was reported: the run costs what was reserved for it.
    Estimate,
}

/// `tokens` priced at `per_mtok` dollars per million, in micro-dollars: exactly
/// `tokens × per_mtok` (a dollar per million tokens is a micro-dollar per token).
fn priced(tokens: i64, per_mtok_usd: f64) -> Option<Micros> {
    let micros = tokens as f64 * per_mtok_usd;
    (0.0..=MAX_USD * 1_000_000.0)
        .contains(&micros)
        .then(|| Micros(micros.round() as i64))
}

/// The cost of `usage` at `price`, or `None` when a count is negative or the sum is absurd.
pub fn usage_cost(usage: Usage, price: ListPrice) -> Option<Micros> {
    if usage.input_tokens < 0 || usage.output_tokens < 0 {
        return None;
    }
    let input = priced(usage.input_tokens, price.input_per_mtok_usd)?;
    let output = priced(usage.output_tokens, price.output_per_mtok_usd)?;
    Some(input.saturating_add(output))
}

/// A completed run's cost: the adapter's `costUsd` when it is a valid amount, else its `usage`
/// priced by the model's list price, else the estimate reserved for the run.
pub fn run_cost(reported: Reported, price: Option<ListPrice>, estimate: Micros) -> (Micros, CostBasis) {
    if let Some(m) = reported.cost {
        return (m, CostBasis::Reported);
    }
    if let (Some(usage), Some(price)) = (reported.usage, price)
        && let Some(m) = usage_cost(usage, price)
    {
        return (m, CostBasis::Usage);
    }
    (estimate, CostBasis::Estimate)
}

/// The list price a combination's usage is priced at: its model's, or for a gg combination the
/// dearest of its bound models' prices, input and output apart (a gg run's usage is not split by
/// model, so it is priced at an upper bound). `None` when a model has no price.
pub fn combination_price(combination: &Combination, models: &ModelCatalogue) -> Option<ListPrice> {
    let mut out: Option<ListPrice> = None;
    for m in combination.models() {
        let p = models.get(m)?.list_price?;
        out = Some(match out {
            None => p,
            Some(o) => ListPrice {
                input_per_mtok_usd: o.input_per_mtok_usd.max(p.input_per_mtok_usd),
                output_per_mtok_usd: o.output_per_mtok_usd.max(p.output_per_mtok_usd),
            },
        });
    }
    out
}

/// What the estimate of a cell's next run is made from, best first.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct EstimateFacts {
    /// The mean cost of the combination's completed runs of this case.
    pub case_mean: Option<Micros>,
    /// The mean cost of the combination's completed runs of any case.
    pub combination_mean: Option<Micros>,
    /// The plan's or ladder's `estimatedRunUsd`.
    pub estimated_run: Option<Micros>,
    /// The model's list price.
    pub price: Option<ListPrice>,
}

/// Where an estimate came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum EstimateBasis {
    CaseMean,
    CombinationMean,
    EstimatedRunUsd,
    ListPrice,
}

/// A cell's estimate: the first of the case's mean, the combination's mean, the plan's
/// `estimatedRunUsd`, and the list price × the default token counts that is known. `None` when
/// none is: such a cell cannot be budgeted (its model is unpriced, which launch already refuses).
pub fn estimate(facts: &EstimateFacts) -> Option<(Micros, EstimateBasis)> {
    if let Some(m) = facts.case_mean {
        return Some((m, EstimateBasis::CaseMean));
    }
    if let Some(m) = facts.combination_mean {
        return Some((m, EstimateBasis::CombinationMean));
    }
    if let Some(m) = facts.estimated_run {
        return Some((m, EstimateBasis::EstimatedRunUsd));
    }
    let usage = Usage {
        input_tokens: DEFAULT_INPUT_TOKENS,
        output_tokens: DEFAULT_OUTPUT_TOKENS,
    };
    facts
        .price
        .and_then(|p| usage_cost(usage, p))
        .map(|m| (m, EstimateBasis::ListPrice))
}

/// A budget's account: what its settled runs cost and what its runs in flight have reserved.
/// Shown on a plan's and a ladder's reads, the matrix and the board as `budgetUsd` (`null`: no
/// budget), `spentUsd` and `reservedUsd`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Ledger {
    /// The budget in US dollars; `null` when there is none.
    #[serde(rename = "budgetUsd", with = "usd::option", default)]
    #[cfg_attr(feature = "openapi", schema(value_type = Option<f64>))]
    pub budget: Option<Micros>,
    /// What the runs it launched that have ended cost, in US dollars.
    #[serde(rename = "spentUsd", with = "usd", default)]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub spent: Micros,
    /// What its runs still in flight have reserved, in US dollars.
    #[serde(rename = "reservedUsd", with = "usd", default)]
    #[cfg_attr(feature = "openapi", schema(value_type = f64))]
    pub reserved: Micros,
}

impl Ledger {
    /// What may still be reserved; `None` is unbounded (no budget).
    pub fn headroom(&self) -> Option<Micros> {
        self.budget
            .map(|b| Micros((b.0 - self.spent.0 - self.reserved.0).max(0)))
    }

    /// Whether reserving `amount` keeps spent + reserved within the budget.
    pub fn fits(&self, amount: Micros) -> bool {
        self.headroom().is_none_or(|h| amount <= h)
    }

    /// Reserves `amount` when it fits (always without a budget); false, reserving nothing, when
    /// it would pass the budget.
    pub fn reserve(&mut self, amount: Micros) -> bool {
        if !self.fits(amount) {
            return false;
        }
        self.reserved = self.reserved.saturating_add(amount);
        true
    }
}

/// One cell a top-up would emit runs for, in emission order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// How many runs the cell would get without a budget.
    pub runs: i64,
    /// The estimate of each of them.
    pub estimate: Micros,
}

/// Walks a top-up's cells in emission order and reserves each cell's whole estimate (its runs ×
/// the estimate of one) while it fits: a cell is emitted whole or not at all (its repeats are the
/// unit of judgement), and a cell that does not fit is held back while a later, cheaper cell may
/// still fit. Without a budget every cell is granted. This is the rule the top-up's walk applies
/// cell by cell ([`crate::top_up::plan_top_up_within`]).
pub fn grant(ledger: Ledger, cells: &[Wanted]) -> Vec<bool> {
    let mut ledger = ledger;
    cells
        .iter()
        .map(|cell| ledger.reserve(cell.estimate.times(cell.runs)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const SONNET: ListPrice = ListPrice {
        input_per_mtok_usd: 3.0,
        output_per_mtok_usd: 15.0,
    };

    fn usd(x: f64) -> Micros {
        Micros::from_usd("x", x).unwrap()
    }

    #[test]
    fn a_budget_is_a_non_negative_finite_number_of_dollars() {
        assert_eq!(BudgetInput { usd: 12.5 }.micros().unwrap(), Micros(12_500_000));
        assert_eq!(BudgetInput { usd: 0.0 }.micros().unwrap(), Micros::ZERO);
        for bad in [-0.01, f64::NAN, f64::INFINITY, 2e9] {
            let e = BudgetInput { usd: bad }.micros().unwrap_err();
            assert_eq!(e.field, "budget.usd", "{bad}");
        }
    }

    #[test]
    fn a_run_costs_what_it_reports_else_its_usage_priced_else_its_estimate() {
        let est = usd(0.5);
        let some_usage = Some(Usage {
            input_tokens: 1,
            output_tokens: 1,
        });
        let both = Reported::from_manifest(Some(1.25), some_usage);
        assert_eq!(run_cost(both, Some(SONNET), est), (usd(1.25), CostBasis::Reported));
        let usage = Reported::from_manifest(
            None,
            Some(Usage {
                input_tokens: 100_000,
                output_tokens: 10_000,
            }),
        );
        // 0.1 M × $3 + 0.01 M × $15 = $0.45.
        assert_eq!(run_cost(usage, Some(SONNET), est), (usd(0.45), CostBasis::Usage));
        // Usage without a price, or nothing at all, or a nonsense costUsd: the estimate.
        assert_eq!(run_cost(usage, None, est), (est, CostBasis::Estimate));
        assert_eq!(
            run_cost(Reported::default(), Some(SONNET), est),
            (est, CostBasis::Estimate)
        );
        for nonsense in [-3.0, f64::NAN, f64::INFINITY, 5e9] {
            let bad = Reported::from_manifest(Some(nonsense), None);
            assert!(bad.is_empty(), "{nonsense}");
            assert_eq!(run_cost(bad, Some(SONNET), est), (est, CostBasis::Estimate));
        }
        // Negative token counts are not a usage either.
        let negative = Reported::from_manifest(
            None,
            Some(Usage {
                input_tokens: -1,
                output_tokens: 5,
            }),
        );
        assert_eq!(run_cost(negative, Some(SONNET), est), (est, CostBasis::Estimate));
    }

    #[test]
    fn a_gg_combination_is_priced_at_the_dearest_of_its_bound_models() {
        use crate::catalogue::ModelFacts;
        let models: ModelCatalogue = [
            (
                "cheap",
                Some(ListPrice {
                    input_per_mtok_usd: 1.0,
                    output_per_mtok_usd: 20.0,
                }),
            ),
            ("dear", Some(SONNET)),
            ("unpriced", None),
        ]
        .into_iter()
        .map(|(m, p)| {
            (
                m.to_string(),
                ModelFacts {
                    context_window: None,
                    list_price: p,
                },
            )
        })
        .collect();
        let gg = |ms: &[&str]| Combination::Gg {
            gg_config_id: "gg_1".into(),
            bindings: ms
                .iter()
                .enumerate()
                .map(|(i, m)| (format!("s{i}"), m.to_string()))
                .collect(),
        };
        let p = combination_price(&gg(&["cheap", "dear"]), &models).unwrap();
        assert_eq!((p.input_per_mtok_usd, p.output_per_mtok_usd), (3.0, 20.0));
        assert_eq!(combination_price(&gg(&["cheap", "unpriced"]), &models), None);
        let h = Combination::Harness {
            harness: "cc".into(),
            model: "dear".into(),
            provider: None,
        };
        assert_eq!(combination_price(&h, &models), Some(SONNET));
    }

    #[test]
    fn budget_fields_name_the_field_and_the_rule() {
        assert!(check_budget_fields(Some(&BudgetInput { usd: 3.0 }), Some(0.25)).is_ok());
        assert!(check_budget_fields(None, None).is_ok());
        let e = check_budget_fields(Some(&BudgetInput { usd: -1.0 }), None).unwrap_err();
        assert_eq!(
            (e.field.as_str(), e.rule.as_str()),
            ("budget.usd", "must be at least 0")
        );
        let e = check_budget_fields(None, Some(0.0)).unwrap_err();
        assert_eq!(e.field, "estimatedRunUsd");
        assert!(e.rule.starts_with("must be at least 0.000001"), "{}", e.rule);
        assert!(check_budget_fields(None, Some(0.000_000_9)).is_err());
        assert_eq!(estimated_run(0.000_001).unwrap(), Micros(1));
        let e = check_budget_fields(None, Some(-2.0)).unwrap_err();
        assert_eq!(e.field, "estimatedRunUsd");
    }

    #[test]
    fn a_ledger_reads_and_writes_as_dollars() {
        let l = Ledger {
            budget: Some(usd(3.0)),
            spent: usd(1.5),
            reserved: usd(0.25),
        };
        let v = serde_json::to_value(l).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"budgetUsd": 3.0, "spentUsd": 1.5, "reservedUsd": 0.25})
        );
        assert_eq!(serde_json::from_value::<Ledger>(v).unwrap(), l);
        let none = serde_json::to_value(Ledger::default()).unwrap();
        assert_eq!(none["budgetUsd"], serde_json::Value::Null);
    }

    #[test]
    fn the_estimate_takes_the_case_mean_then_the_combination_mean_then_the_plans_then_the_price() {
        let mut f = EstimateFacts {
            case_mean: Some(usd(1.0)),
            combination_mean: Some(usd(2.0)),
            estimated_run: Some(usd(3.0)),
            price: Some(SONNET),
        };
        assert_eq!(estimate(&f), Some((usd(1.0), EstimateBasis::CaseMean)));
        f.case_mean = None;
        assert_eq!(estimate(&f), Some((usd(2.0), EstimateBasis::CombinationMean)));
        f.combination_mean = None;
        assert_eq!(estimate(&f), Some((usd(3.0), EstimateBasis::EstimatedRunUsd)));
        f.estimated_run = None;
        // 200k × $3/M + 20k × $15/M = $0.60 + $0.30.
        assert_eq!(estimate(&f), Some((usd(0.9), EstimateBasis::ListPrice)));
        f.price = None;
        assert_eq!(estimate(&f), None);
    }

    #[test]
    fn a_budget_of_three_runs_grants_three_and_holds_the_rest_back() {
        let ledger = Ledger {
            budget: Some(usd(3.0)),
            ..Ledger::default()
        };
        let cells = [Wanted {
            runs: 1,
            estimate: usd(1.0),
        }; 5];
        let granted = grant(ledger, &cells);
        assert_eq!(granted, [true, true, true, false, false]);
        // Raising the budget lets the next top-up continue (3 reserved or spent already).
        let raised = Ledger {
            budget: Some(usd(5.0)),
            spent: usd(2.0),
            reserved: usd(1.0),
        };
        assert_eq!(grant(raised, &cells[3..]), [true, true]);
    }

    #[test]
    fn a_cell_is_granted_whole_or_held_and_a_later_cheaper_cell_may_still_fit() {
        let ledger = Ledger {
            budget: Some(usd(2.5)),
            ..Ledger::default()
        };
        let cells = [
            Wanted {
                runs: 3,
                estimate: usd(1.0),
            },
            Wanted {
                runs: 2,
                estimate: usd(1.0),
            },
            Wanted {
                runs: 1,
                estimate: usd(0.5),
            },
        ];
        assert_eq!(grant(ledger, &cells), [false, true, true]);
        // A budget of 0 grants nothing that costs anything.
        let zero = Ledger {
            budget: Some(Micros::ZERO),
            ..Ledger::default()
        };
        assert_eq!(grant(zero, &cells), [false, false, false]);
    }

    #[test]
    fn no_budget_grants_everything() {
        let cells = [Wanted {
            runs: 7,
            estimate: usd(100.0),
        }];
        assert_eq!(grant(Ledger::default(), &cells), [true]);
        let mut l = Ledger::default();
        assert!(l.reserve(usd(1e6)));
        assert_eq!(l.reserved, usd(1e6));
    }

    proptest! {
        /// Whatever the cells, what a top-up reserves never passes the budget, cells are granted
        /// whole, and a cell is held only when it did not fit.
        #[test]
        fn grants_never_pass_the_budget(
            budget in 0i64..50_000_000,
            spent in 0i64..20_000_000,
            reserved in 0i64..20_000_000,
            cells in proptest::collection::vec((0i64..6, 0i64..3_000_000), 0..30),
        ) {
            let ledger = Ledger { budget: Some(Micros(budget)), spent: Micros(spent), reserved: Micros(reserved) };
            let wanted: Vec<Wanted> = cells.iter().map(|&(runs, e)| Wanted { runs, estimate: Micros(e) }).collect();
            let granted = grant(ledger, &wanted);
            prop_assert_eq!(granted.len(), wanted.len());
            let mut total = spent + reserved;
            for (w, g) in wanted.iter().zip(&granted) {
                let cost = w.runs * w.estimate.0;
                if *g {
                    total += cost;
                    prop_assert!(cost == 0 || total <= budget);
                } else {
                    // The cell would have passed the budget.
                    prop_assert!(total + cost > budget);
                }
            }
        }

        /// Reserving in any order never takes a ledger past its budget, from any start within it.
        #[test]
        fn reservations_never_pass_the_budget(
            budget in 0i64..10_000_000,
            amounts in proptest::collection::vec(0i64..4_000_000, 0..40),
        ) {
            let mut l = Ledger { budget: Some(Micros(budget)), ..Ledger::default() };
            for a in amounts {
                let before = l.reserved;
                if l.reserve(Micros(a)) {
                    prop_assert_eq!(l.reserved.0, before.0 + a);
                } else {
                    prop_assert_eq!(l.reserved, before);
                }
                prop_assert!(l.spent.0 + l.reserved.0 <= budget);
            }
        }
    }
}
