//! Decision Receipts: what belay decided on its own (a sibling selection, a conflict integrated,
//! a repair Task), with the inputs it decided on and the outcome, so a person can check it.

use crate::ids::{ChangeId, ReceiptId};
use serde::{Deserialize, Serialize};

#[cfg(feature = "openapi")]
use utoipa::ToSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ReceiptKind {
    CandidateSelection,
    ConflictIntegration,
    AcceptanceRepair,
    /// A person cancelled the Change.
    ChangeCancelled,
}

impl ReceiptKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            ReceiptKind::CandidateSelection => "CANDIDATE_SELECTION",
            ReceiptKind::ConflictIntegration => "CONFLICT_INTEGRATION",
            ReceiptKind::AcceptanceRepair => "ACCEPTANCE_REPAIR",
            ReceiptKind::ChangeCancelled => "CHANGE_CANCELLED",
        }
    }
}

/// One receipt as stored and shown.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DecisionReceipt {
    pub id: ReceiptId,
    pub change_id: ChangeId,
    pub kind: ReceiptKind,
    /// What the decision read.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub inputs: serde_json::Value,
    /// What it decided.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub outcome: serde_json::Value,
    pub created_at: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_serialize_as_the_spec_names_them() {
        for k in [
            ReceiptKind::CandidateSelection,
            ReceiptKind::ConflictIntegration,
            ReceiptKind::AcceptanceRepair,
        ] {
            assert_eq!(serde_json::to_value(k).unwrap(), serde_json::json!(k.as_str()));
        }
    }
}
