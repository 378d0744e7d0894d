//! What each workflow is for, in words: the summary (one line) and details (a few lines) that
//! Temporal's user metadata carries on every start, so the Web UI lists belay's workflows by
//! purpose rather than by bare ids. Both are start options, never workflow commands a replay
//! compares, so they change no recorded history.

use crate::contracts::ClaimedJob;
use belay_domain::ids::{JobId, RunId};

/// A workflow's user metadata: the Web UI's "Summary" and "Details".
#[derive(Debug, Clone, PartialEq)]
pub struct Described {
    pub summary: String,
    pub details: String,
}

fn described(summary: String, details: Vec<String>) -> Described {
    Described {
        summary,
        details: details.join("\n"),
    }
}

/// `plan:plan_1` → "plan plan_1"; anything else as it is.
fn launcher(origin: Option<&str>) -> String {
    match origin.and_then(|o| o.split_once(':')) {
        Some((kind, id)) => format!("{kind} {id}"),
        None => "a person (ad hoc)".to_owned(),
    }
}

/// A job's run (RunWorkflow `run-<job id>`).
pub fn run(job: &ClaimedJob) -> Described {
    let what = match job.models.as_slice() {
        [] => job.harness.clone(),
        models => format!("{} with {}", job.harness, models.join(" + ")),
    };
    let case = job.case.as_deref().unwrap_or("its case");
    let by = launcher(job.origin.as_deref());
    described(
        format!("Run {what} on {case}, for {by}"),
        vec![
            format!("Evaluates {case} with harness {what}."),
            format!(
                "Job {}; its run is {} once it completes.",
                job.job_id,
                run_of(&job.job_id)
            ),
            format!("Launched by {by}."),
        ],
    )
}

fn run_of(job: &JobId) -> RunId {
    RunId::for_job(job)
}

/// The one dispatcher (`dispatcher`).
pub fn dispatcher() -> Described {
    described(
        "Dispatcher: claims queued jobs and starts their runs".to_owned(),
        vec![
            "The one long-lived dispatcher: each wake claims the jobs the lanes allow and starts a run per job."
                .to_owned(),
            "It continues as new every so many claims; a wake signal tells it something changed.".to_owned(),
        ],
    )
}

/// A plan's or a ladder's top-up (`of` is `plan` or `ladder`).
pub fn top_up(of: &str, id: &str) -> Described {
    described(
        format!("Top-up of {of} {id}: queues the runs its cells are missing"),
        vec![
            format!("Reads {of} {id}'s board, and enqueues one job per missing run within its bounds."),
            format!("The runs it launches carry the {of}'s id as a search attribute."),
        ],
    )
}

/// A ladder's climb (`ladder-<id>`).
pub fn climb(ladder: &str) -> Described {
    described(
        format!("Climb of ladder {ladder}: moves climbers up its rungs"),
        vec![
            format!(
                "Reads ladder {ladder}'s board when poked, advances each climber past a cleared rung and asks for top-ups."
            ),
            "It continues as new every so many steps.".to_owned(),
        ],
    )
}

/// A Candidate's verification (`verify-<candidate>`).
pub fn verification(candidate: &str, change: &str) -> Described {
    described(
        format!("Verify candidate {candidate} of change {change}"),
        vec![
            format!("Runs candidate {candidate}'s checks (build, tests, browser) and records its evidence."),
            "It ends when the candidate awaits review, is rejected or goes stale.".to_owned(),
        ],
    )
}

/// A Candidate's promotion at a base generation.
pub fn promotion(candidate: &str, generation: i64) -> Described {
    described(
        format!("Promote candidate {candidate} (base generation {generation})"),
        vec![
            format!("Fast-forwards the project's canonical branch to candidate {candidate}'s composed tree."),
            "Its id names the base generation, so racing promotions share one run.".to_owned(),
        ],
    )
}

/// A project's provisioning or deletion.
pub fn project(project: &str, deleting: bool) -> Described {
    if deleting {
        described(
            format!("Delete project {project}"),
            vec![format!(
                "Removes project {project}'s repositories and forks, then its record."
            )],
        )
    } else {
        described(
            format!("Provision project {project}"),
            vec![format!(
                "Creates project {project}'s canonical repository and marks it ready."
            )],
        )
    }
}

/// A task run's workspace.
pub fn workspace(task_run: &str) -> Described {
    described(
        format!("Workspace of task run {task_run}"),
        vec![format!(
            "Holds task run {task_run}'s fork and Sandbox while its agent works, and publishes its ChangeSet."
        )],
    )
}

/// An edit session.
pub fn edit_session(session: &str, project: &str) -> Described {
    described(
        format!("Edit session {session} in project {project}"),
        vec![format!(
            "Holds edit session {session}'s fork and Sandbox in project {project} until it ends or idles out."
        )],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(origin: Option<&str>, models: &[&str]) -> ClaimedJob {
        ClaimedJob {
            job_id: JobId::from("job_0a1b"),
            harness: "codex".into(),
            origin: origin.map(str::to_owned),
            case: Some("todo@1/base/none".into()),
            models: models.iter().map(|m| m.to_string()).collect(),
        }
    }

    #[test]
    fn a_run_is_described_by_its_case_harness_model_and_launcher() {
        let d = run(&job(Some("plan:plan_9"), &["m1"]));
        assert_eq!(d.summary, "Run codex with m1 on todo@1/base/none, for plan plan_9");
        assert!(d.details.contains("run_0a1b"), "{}", d.details);
        let ad_hoc = run(&job(None, &[]));
        assert_eq!(ad_hoc.summary, "Run codex on todo@1/base/none, for a person (ad hoc)");
        let gg = run(&job(Some("ladder:lad_1"), &["m1", "m2"]));
        assert_eq!(
            gg.summary,
            "Run codex with m1 + m2 on todo@1/base/none, for ladder lad_1"
        );
    }

    #[test]
    fn every_summary_is_one_line() {
        for d in [
            run(&job(Some("ladder:lad_1"), &[])),
            dispatcher(),
            top_up("plan", "plan_1"),
            climb("lad_1"),
            verification("cand_1", "chg_1"),
            promotion("cand_1", 3),
            project("proj_1", true),
            project("proj_1", false),
            workspace("trun_1"),
            edit_session("edit_1", "proj_1"),
        ] {
            assert!(!d.summary.is_empty() && !d.summary.contains('\n'), "{d:?}");
            assert!(!d.details.is_empty(), "{d:?}");
        }
    }
}
