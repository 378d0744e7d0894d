//! The state machines of a Change, a Candidate, a Task (through its runs) and an approval, as
//! tables: every state is final, or it names the ways out of it, a person's (or an agent's)
//! gesture through the API and the workflow steps that move it. The tables exist so that no
//! state is a dead end: a state that waits on a person always has a gesture that leaves it, and
//! every state reaches a final one. The code that moves the rows (the store's conditional
//! updates) follows these tables; the tests below hold the tables to those rules.

use crate::approval::ApprovalStatus;
use crate::candidate::CandidateStatus;
use crate::change::{ChangeStatus, TaskRunStatus};

/// Who moves a row out of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// A call a person or an agent makes: the route that makes it.
    Gesture(&'static str),
    /// A step of a workflow (or of the store, on a workflow's behalf): the step's name.
    Step(&'static str),
}

/// One way out of a state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit<S: 'static> {
    pub to: S,
    pub by: Way,
}

/// A gesture out of a state (a struct literal, so the tables are `'static`).
macro_rules! gesture {
    ($to:expr, $route:expr) => {
        Exit {
            to: $to,
            by: Way::Gesture($route),
        }
    };
}

/// A workflow step out of a state.
macro_rules! step {
    ($to:expr, $name:expr) => {
        Exit {
            to: $to,
            by: Way::Step($name),
        }
    };
}

/// The route that cancels a Change: the gesture out of every state a Change can wait in.
pub const CANCEL_CHANGE: &str = "POST /v1/changes/{id}/cancel";
/// The route a person approves (or rejects) a gated Candidate on.
pub const DECIDE_APPROVAL: &str = "POST /v1/candidates/{id}/approvals";
/// The route that promotes a verified Candidate (a person picking one after a tie).
pub const PROMOTE: &str = "POST /v1/candidates/{id}/promote";

/// A state machine: its states, and for each the ways out (none: the state is final).
pub trait Lifecycle: Copy + Eq + std::fmt::Debug + 'static {
    const STATES: &'static [Self];
    fn exits(self) -> &'static [Exit<Self>];
    /// Whether the state waits on a person (it must then have a gesture out).
    fn waits_on_person(self) -> bool {
        false
    }
    fn is_final(self) -> bool {
        self.exits().is_empty()
    }
}

impl Lifecycle for ChangeStatus {
    const STATES: &'static [Self] = &[
        ChangeStatus::Running,
        ChangeStatus::Verifying,
        ChangeStatus::AwaitingApproval,
        ChangeStatus::Promoted,
        ChangeStatus::Failed,
        ChangeStatus::Cancelled,
    ];

    fn exits(self) -> &'static [Exit<Self>] {
        use ChangeStatus::*;
        match self {
            Running => &[
                step!(Verifying, "verification round started (a Candidate composes)"),
                step!(Failed, "no Candidate can ship and no repair is due"),
                gesture!(Cancelled, CANCEL_CHANGE),
            ],
            Verifying => &[
                step!(Running, "integration or repair: a Task runs again"),
                step!(
                    AwaitingApproval,
                    "a person must decide (gate, hold, no winner, repair spent)"
                ),
                step!(Promoted, "a Candidate promoted"),
                step!(Failed, "no Candidate can ship and no repair is due"),
                gesture!(Cancelled, CANCEL_CHANGE),
            ],
            AwaitingApproval => &[
                gesture!(Promoted, DECIDE_APPROVAL),
                gesture!(Promoted, PROMOTE),
                gesture!(Running, DECIDE_APPROVAL),
                gesture!(Cancelled, CANCEL_CHANGE),
                step!(Running, "repair: the Change's one repair Task"),
            ],
            Promoted | Failed | Cancelled => &[],
        }
    }

    fn waits_on_person(self) -> bool {
        self == ChangeStatus::AwaitingApproval
    }
}

impl Lifecycle for CandidateStatus {
    const STATES: &'static [Self] = &CandidateStatus::ALL;

    fn exits(self) -> &'static [Exit<Self>] {
        use CandidateStatus::*;
        match self {
            Composing => &[
                step!(Verifying, "ChangeSets merged and planned"),
                step!(Rejected, "incompatible, merge conflict, no Sandbox budget"),
                step!(Stale, "base behind canonical"),
                gesture!(Rejected, CANCEL_CHANGE),
            ],
            Verifying => &[
                step!(Verified, "every check recorded; the gate passed"),
                step!(Rejected, "a required or the preview check failed"),
                step!(Stale, "base behind canonical"),
                gesture!(Rejected, CANCEL_CHANGE),
            ],
            Verified => &[
                step!(Promoted, "promotion: compare-and-swap on the canonical generation"),
                step!(Rejected, "lost the sibling selection"),
                step!(Stale, "another Candidate promoted first"),
                gesture!(Promoted, DECIDE_APPROVAL),
                gesture!(Rejected, DECIDE_APPROVAL),
                gesture!(Rejected, CANCEL_CHANGE),
            ],
            Rejected | Stale | Promoted => &[],
        }
    }

    fn waits_on_person(self) -> bool {
        // A verified Candidate held for approval waits on a person.
        self == CandidateStatus::Verified
    }
}

/// A Task's state, read from its runs: it has none yet, one runs, the last one published a
/// ChangeSet, or the last one failed (a Task whose run failed can run again).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Pending,
    Running,
    Published,
    Failed,
    /// Its Change ended: no run starts any more.
    Ended,
}

impl TaskState {
    /// The Task's state from its Change and its latest run.
    pub fn of(change: ChangeStatus, latest_run: Option<TaskRunStatus>) -> TaskState {
        if change.is_finished() {
            return TaskState::Ended;
        }
        match latest_run {
            None => TaskState::Pending,
            Some(TaskRunStatus::Running) => TaskState::Running,
            Some(TaskRunStatus::Succeeded) => TaskState::Published,
            Some(TaskRunStatus::Failed) => TaskState::Failed,
        }
    }
}

impl Lifecycle for TaskState {
    const STATES: &'static [Self] = &[
        TaskState::Pending,
        TaskState::Running,
        TaskState::Published,
        TaskState::Failed,
        TaskState::Ended,
    ];

    fn exits(self) -> &'static [Exit<Self>] {
        use TaskState::*;
        match self {
            Pending => &[
                gesture!(Running, "POST /v1/tasks/{id}/runs"),
                gesture!(Ended, CANCEL_CHANGE),
            ],
            Running => &[
                gesture!(Published, "POST /v1/task-runs/{id}/workspace/publish"),
                step!(Failed, "the workspace closed after an hour without a call, or was lost"),
                gesture!(Failed, CANCEL_CHANGE),
            ],
            Published => &[
                step!(Pending, "integration: the Task is reset with a fresh attempt window"),
                step!(Ended, "its Change promoted or failed"),
                gesture!(Ended, CANCEL_CHANGE),
            ],
            Failed => &[
                gesture!(Running, "POST /v1/tasks/{id}/runs"),
                gesture!(Ended, CANCEL_CHANGE),
            ],
            Ended => &[],
        }
    }
}

impl Lifecycle for TaskRunStatus {
    const STATES: &'static [Self] = &[TaskRunStatus::Running, TaskRunStatus::Succeeded, TaskRunStatus::Failed];

    fn exits(self) -> &'static [Exit<Self>] {
        use TaskRunStatus::*;
        match self {
            Running => &[
                gesture!(Succeeded, "POST /v1/task-runs/{id}/workspace/publish"),
                step!(Failed, "workspace closed idle, lost, or refused"),
                gesture!(Failed, CANCEL_CHANGE),
            ],
            Succeeded | Failed => &[],
        }
    }
}

impl Lifecycle for ApprovalStatus {
    const STATES: &'static [Self] = &ApprovalStatus::ALL;

    fn exits(self) -> &'static [Exit<Self>] {
        use ApprovalStatus::*;
        match self {
            Requested => &[
                gesture!(Granted, DECIDE_APPROVAL),
                gesture!(Rejected, DECIDE_APPROVAL),
                gesture!(Cancelled, CANCEL_CHANGE),
            ],
            Granted | Rejected | Cancelled => &[],
        }
    }

    fn waits_on_person(self) -> bool {
        self == ApprovalStatus::Requested
    }
}

/// Whether a final state can be reached from `from` through the table.
pub fn reaches_an_end<S: Lifecycle>(from: S) -> bool {
    let mut seen: Vec<S> = vec![from];
    let mut i = 0;
    while i < seen.len() {
        let s = seen[i];
        if s.is_final() {
            return true;
        }
        for e in s.exits() {
            if !seen.contains(&e.to) {
                seen.push(e.to);
            }
        }
        i += 1;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every state of the table: final, or it names its exits; each exit goes to a state of the
    /// table; a final state is reachable; a state that waits on a person has a gesture out.
    fn no_dead_ends<S: Lifecycle>() {
        assert!(!S::STATES.is_empty());
        for &s in S::STATES {
            if s.is_final() {
                assert!(!s.waits_on_person(), "{s:?} is final and waits on a person");
                continue;
            }
            for e in s.exits() {
                assert!(S::STATES.contains(&e.to), "{s:?} leads to {:?}, not a state", e.to);
                assert_ne!(e.to, s, "{s:?} loops on itself");
            }
            assert!(reaches_an_end(s), "{s:?} never ends");
            if s.waits_on_person() {
                assert!(
                    s.exits().iter().any(|e| matches!(e.by, Way::Gesture(_))),
                    "{s:?} waits on a person who can do nothing"
                );
            }
        }
    }

    #[test]
    fn every_change_state_is_final_or_names_its_way_out() {
        no_dead_ends::<ChangeStatus>();
        for &s in ChangeStatus::STATES {
            assert_eq!(s.is_final(), s.is_finished(), "{s:?}");
        }
        // Every state that has not ended can be cancelled.
        for &s in ChangeStatus::STATES.iter().filter(|s| !s.is_final()) {
            assert!(
                s.exits()
                    .iter()
                    .any(|e| e.to == ChangeStatus::Cancelled && e.by == Way::Gesture(CANCEL_CHANGE)),
                "{s:?} cannot be cancelled"
            );
        }
        assert_eq!(
            ChangeStatus::STATES.iter().filter(|s| s.is_final()).count(),
            3,
            "promoted, failed, cancelled"
        );
    }

    #[test]
    fn a_change_awaiting_approval_is_left_by_a_persons_gesture() {
        let s = ChangeStatus::AwaitingApproval;
        assert!(s.waits_on_person());
        let gestures: Vec<&str> = s
            .exits()
            .iter()
            .filter_map(|e| match e.by {
                Way::Gesture(g) => Some(g),
                Way::Step(_) => None,
            })
            .collect();
        assert!(gestures.contains(&CANCEL_CHANGE));
        assert!(gestures.contains(&DECIDE_APPROVAL));
    }

    #[test]
    fn every_candidate_state_is_final_or_names_its_way_out() {
        no_dead_ends::<CandidateStatus>();
        for &s in CandidateStatus::STATES {
            assert_eq!(Lifecycle::is_final(s), CandidateStatus::is_final(s), "{s:?}");
        }
        // A cancelled Change rejects every Candidate that is still running or waiting.
        for &s in CandidateStatus::STATES.iter().filter(|s| !Lifecycle::is_final(**s)) {
            assert!(
                s.exits().contains(&gesture!(CandidateStatus::Rejected, CANCEL_CHANGE)),
                "{s:?}"
            );
        }
    }

    #[test]
    fn every_task_state_is_final_or_names_its_way_out() {
        no_dead_ends::<TaskState>();
        no_dead_ends::<TaskRunStatus>();
        assert!(TaskRunStatus::Succeeded.is_final() && TaskRunStatus::Failed.is_final());
        assert_eq!(TaskState::of(ChangeStatus::Running, None), TaskState::Pending);
        assert_eq!(
            TaskState::of(ChangeStatus::Verifying, Some(TaskRunStatus::Running)),
            TaskState::Running
        );
        assert_eq!(
            TaskState::of(ChangeStatus::Running, Some(TaskRunStatus::Succeeded)),
            TaskState::Published
        );
        assert_eq!(
            TaskState::of(ChangeStatus::AwaitingApproval, Some(TaskRunStatus::Failed)),
            TaskState::Failed
        );
        for ended in [ChangeStatus::Cancelled, ChangeStatus::Failed, ChangeStatus::Promoted] {
            assert_eq!(TaskState::of(ended, Some(TaskRunStatus::Running)), TaskState::Ended);
        }
    }

    #[test]
    fn every_approval_state_is_final_or_names_its_way_out() {
        no_dead_ends::<ApprovalStatus>();
        assert!(ApprovalStatus::Requested.waits_on_person());
        for s in [
            ApprovalStatus::Granted,
            ApprovalStatus::Rejected,
            ApprovalStatus::Cancelled,
        ] {
            assert!(s.is_final(), "{s:?}");
        }
        assert!(
            ApprovalStatus::Requested
                .exits()
                .contains(&gesture!(ApprovalStatus::Cancelled, CANCEL_CHANGE))
        );
    }

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Stuck {
        Start,
        Limbo,
        End,
    }

    impl Lifecycle for Stuck {
        const STATES: &'static [Self] = &[Stuck::Start, Stuck::Limbo, Stuck::End];
        fn exits(self) -> &'static [Exit<Self>] {
            match self {
                Stuck::Start => &[Exit {
                    to: Stuck::Limbo,
                    by: Way::Step("s"),
                }],
                // Limbo leads only back to itself through Start: no end is reachable.
                Stuck::Limbo => &[Exit {
                    to: Stuck::Start,
                    by: Way::Step("s"),
                }],
                Stuck::End => &[],
            }
        }
        fn waits_on_person(self) -> bool {
            self == Stuck::Limbo
        }
    }

    #[test]
    fn a_table_with_a_loop_and_no_end_or_a_person_with_nothing_to_do_is_caught() {
        assert!(!reaches_an_end(Stuck::Start));
        assert!(!reaches_an_end(Stuck::Limbo));
        assert!(reaches_an_end(Stuck::End));
        assert!(std::panic::catch_unwind(no_dead_ends::<Stuck>).is_err());
    }
}
