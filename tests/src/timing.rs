//! Judging a run against time bounds on a shared machine.
//!
//! A test that compares durations (the replay's against the job's, a phase
//! found in a trace against the job's record) judges one run of each side
//! on a machine whose other work (CI builds beside it, a neighbour's burst)
//! can move one of them. [`judge_twice`] runs such a test's work once more
//! where the first run misses a bound and fails only when the second misses
//! too: a wrong replay misses both times, a burst of other work one. Each
//! bound missed is named, so the failure reads without the run's output.
//! What does not depend on the machine's load (a replay's errors, the saves
//! it made) belongs in the attempt, asserted at once, never run again.

/// The bounds one run missed, each a sentence.
#[derive(Default, Debug)]
pub struct Missed(pub Vec<String>);

impl Missed {
    /// Records `what` unless `held`.
    pub fn unless(&mut self, held: bool, what: impl FnOnce() -> String) {
        if !held {
            self.0.push(what());
        }
    }
}

/// Runs `attempt` and `judge`s its outcome; where that misses any bound,
/// runs and judges once more, and panics naming both runs' misses when the
/// second misses too. `attempt` returns `None` where this machine cannot
/// run it (it has said so), and the test ends there.
pub fn judge_twice<T>(mut attempt: impl FnMut() -> Option<T>, judge: impl Fn(&T) -> Missed) {
    let mut first = Vec::new();
    for run in 1..=2 {
        let Some(outcome) = attempt() else {
            return;
        };
        let missed = judge(&outcome).0;
        if missed.is_empty() {
            if run == 2 {
                eprintln!("the first run missed, the second met every bound: {first:#?}");
            }
            return;
        }
        eprintln!("run {run} missed: {missed:#?}");
        if run == 2 {
            panic!(
                "both runs missed bounds:\n  first: {}\n  second: {}",
                first.join("\n         "),
                missed.join("\n          ")
            );
        }
        first = missed;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn judge_even(n: &u32) -> Missed {
        let mut m = Missed::default();
        m.unless(n.is_multiple_of(2), || format!("{n} is odd"));
        m
    }

    #[test]
    fn a_first_miss_is_run_again_and_a_second_met_passes() {
        let runs = Cell::new(0);
        judge_twice(
            || {
                runs.set(runs.get() + 1);
                Some(runs.get())
            },
            judge_even,
        );
        assert_eq!(runs.get(), 2);
    }

    #[test]
    fn a_first_run_met_is_not_run_again() {
        let runs = Cell::new(0);
        judge_twice(
            || {
                runs.set(runs.get() + 1);
                Some(2)
            },
            judge_even,
        );
        assert_eq!(runs.get(), 1);
    }

    #[test]
    #[should_panic(expected = "both runs missed bounds:\n  first: 1 is odd\n  second: 3 is odd")]
    fn two_misses_fail_naming_both() {
        let runs = Cell::new(0);
        judge_twice(
            || {
                runs.set(runs.get() + 1);
                Some(runs.get() * 2 - 1)
            },
            judge_even,
        );
    }

    #[test]
    fn a_run_that_cannot_be_made_ends_the_test() {
        let runs = Cell::new(0);
        judge_twice(
            || {
                runs.set(runs.get() + 1);
                None::<u32>
            },
            judge_even,
        );
        assert_eq!(runs.get(), 1);
    }
}
