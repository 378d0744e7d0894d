//! What a plan or a ladder may spend: a run's cost, the estimate a top-up reserves before it
//! emits a run, and which of a top-up's runs fit under the budget.
//!
//! Money is counted in whole micro-dollars ([`Micros`]), never in floating point: a reservation
//! is a conditional update in the store (`spent + reserved + estimate <= budget`), and sums of
//! integers are exact in both backends and in any order. The API speaks US dollars as numbers;
//! [`Micros::from_usd`] rounds each to the nearest micro-dollar, once, at the edge.

use crate::catalogue::ListPrice;
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
}

/// Token counts an adapter reports in its manifest (`usage: {inputTokens, outputTokens}`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: i64,
    pub output_tokens: i64,
}

/// What an adapter's manifest says a run cost, read from its `costUsd` and `usage` fields.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reported {
    pub cost_usd: Option<f64>,
    pub usage: Option<Usage>,
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
    if let Some(m) = reported.cost_usd.and_then(|usd| Micros::from_usd("costUsd", usd).ok()) {
        return (m, CostBasis::Reported);
    }
    if let (Some(usage), Some(price)) = (reported.usage, price)
        && let Some(m) = usage_cost(usage, price)
    {
        return (m, CostBasis::Usage);
    }
    (estimate, CostBasis::Estimate)
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Ledger {
    pub budget: Option<Micros>,
    pub spent: Micros,
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
}

/// One cell a top-up would emit runs for, in emission order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    /// How many runs the cell would get without a budget.
    pub runs: i64,
    /// The estimate of each of them.
    pub estimate: Micros,
}

/// What the budget lets a top-up emit for one cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Granted {
    /// Runs to emit (each reserving the cell's estimate).
    pub runs: i64,
    /// Runs held back by the budget: reported with reason `budget` when non-zero.
    pub held: i64,
}

/// Walks a top-up's cells in emission order and reserves each run's estimate while it fits:
/// a cell gets as many of its runs as fit, and a run that does not fit is held back, while a
/// later, cheaper cell may still fit. Without a budget everything is granted.
pub fn grant(ledger: Ledger, cells: &[Wanted]) -> Vec<Granted> {
    let mut ledger = ledger;
    cells
        .iter()
        .map(|cell| {
            let runs = cell.runs.max(0);
            let fit = match ledger.headroom() {
                None => runs,
                Some(_) if cell.estimate.0 <= 0 => runs,
                Some(h) => runs.min(h.0 / cell.estimate.0),
            };
            ledger.reserved = ledger
                .reserved
                .saturating_add(Micros(fit.saturating_mul(cell.estimate.0)));
            Granted {
                runs: fit,
                held: runs - fit,
            }
        })
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
        let both = Reported {
            cost_usd: Some(1.25),
            usage: Some(Usage {
                input_tokens: 1,
                output_tokens: 1,
            }),
        };
        assert_eq!(run_cost(both, Some(SONNET), est), (usd(1.25), CostBasis::Reported));
        let usage = Reported {
            cost_usd: None,
            usage: Some(Usage {
                input_tokens: 100_000,
                output_tokens: 10_000,
            }),
        };
        // 0.1 M × $3 + 0.01 M × $15 = $0.45.
        assert_eq!(run_cost(usage, Some(SONNET), est), (usd(0.45), CostBasis::Usage));
        // Usage without a price, or nothing at all, or a nonsense costUsd: the estimate.
        assert_eq!(run_cost(usage, None, est), (est, CostBasis::Estimate));
        assert_eq!(
            run_cost(Reported::default(), Some(SONNET), est),
            (est, CostBasis::Estimate)
        );
        let bad = Reported {
            cost_usd: Some(-3.0),
            usage: None,
        };
        assert_eq!(run_cost(bad, Some(SONNET), est), (est, CostBasis::Estimate));
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
        assert_eq!(granted.iter().map(|g| g.runs).sum::<i64>(), 3);
        assert_eq!(&granted[3..], &[Granted { runs: 0, held: 1 }; 2]);
        // Raising the budget lets the next top-up continue (3 reserved or spent already).
        let raised = Ledger {
            budget: Some(usd(5.0)),
            spent: usd(2.0),
            reserved: usd(1.0),
        };
        let next = grant(raised, &cells[3..]);
        assert_eq!(next, vec![Granted { runs: 1, held: 0 }; 2]);
    }

    #[test]
    fn a_cell_gets_the_runs_that_fit_and_a_later_cheaper_cell_may_still_fit() {
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
                runs: 1,
                estimate: usd(1.0),
            },
            Wanted {
                runs: 1,
                estimate: usd(0.5),
            },
        ];
        assert_eq!(
            grant(ledger, &cells),
            vec![
                Granted { runs: 2, held: 1 },
                Granted { runs: 0, held: 1 },
                Granted { runs: 1, held: 0 }
            ]
        );
    }

    #[test]
    fn no_budget_grants_everything() {
        let cells = [Wanted {
            runs: 7,
            estimate: usd(100.0),
        }];
        assert_eq!(grant(Ledger::default(), &cells), vec![Granted { runs: 7, held: 0 }]);
    }

    proptest! {
        /// Whatever the cells, what a top-up reserves never passes the budget, every wanted run
        /// is either granted or held, and a run is held only when it did not fit.
        #[test]
        fn grants_never_pass_the_budget(
            budget in 0i64..50_000_000,
            spent in 0i64..20_000_000,
            cells in proptest::collection::vec((0i64..6, 0i64..3_000_000), 0..30),
        ) {
            let ledger = Ledger { budget: Some(Micros(budget)), spent: Micros(spent), reserved: Micros::ZERO };
            let wanted: Vec<Wanted> = cells.iter().map(|&(runs, e)| Wanted { runs, estimate: Micros(e) }).collect();
            let granted = grant(ledger, &wanted);
            let mut reserved = 0i64;
            for (w, g) in wanted.iter().zip(&granted) {
                prop_assert_eq!(g.runs + g.held, w.runs);
                reserved += g.runs * w.estimate.0;
                if g.held > 0 {
                    // The next run of this cell would have passed the budget.
                    prop_assert!(spent + reserved + w.estimate.0 > budget);
                }
            }
            if reserved > 0 {
                prop_assert!(spent + reserved <= budget);
            }
        }
    }
}
