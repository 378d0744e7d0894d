//! The dispatcher's wake-up signal, defined on its own so that every workflow that frees or
//! fills a slot (a run ending, a workspace closing) can signal the dispatcher without importing
//! it, and the dispatcher (which starts runs) does not import its own callers back.

use temporalio_common::{SignalDefinition, UntypedWorkflow};

/// The signal's name: the dispatcher's `#[signal] fn wake` answers to it.
pub const NAME: &str = "wake";

/// "Something changed": a job was enqueued, a run ended, a job was cancelled. No payload.
pub struct Wake;

impl SignalDefinition for Wake {
    type Workflow = UntypedWorkflow;
    type Input = ();

    fn name(&self) -> &str {
        NAME
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dispatcher_answers_to_the_wake_signals_name() {
        assert_eq!(crate::DispatcherWorkflow::wake.name(), Wake.name());
    }
}
