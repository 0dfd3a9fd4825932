//! What a call came to on the target, whichever kind it is: the bytes it
//! moved, whether it was made and succeeded, and the error it met.

/// What a call came to.
pub(super) struct CallOutcome {
    /// Bytes it moved.
    pub bytes: u64,
    /// Ok(true) made and succeeded, Ok(false) made and failed, Err(()) not
    /// made (nothing to make it on).
    pub made: Result<bool, ()>,
    /// The error a made call met.
    pub errno: Option<i32>,
}

impl CallOutcome {
    pub fn made(bytes: u64) -> Self {
        CallOutcome {
            bytes,
            made: Ok(true),
            errno: None,
        }
    }

    pub fn failed(errno: i32) -> Self {
        CallOutcome {
            bytes: 0,
            made: Ok(false),
            errno: Some(errno),
        }
    }

    pub fn not_made() -> Self {
        CallOutcome {
            bytes: 0,
            made: Err(()),
            errno: None,
        }
    }
}
