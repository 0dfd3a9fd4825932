//! One branch per row on its op. The per-row counting code asks the op many
//! questions (data or not, read or write, quiet for the roles, which run of
//! the activity); in a trace whose ops interleave (open, read, close of many
//! loader workers) each of those branches is a likely misprediction. Handing
//! the row to [`by_op!`] with the common ops spelled as constants lets the
//! compiler build the inlined code once per common op, those questions
//! answered at compile time, so a row costs one indirect branch instead.

/// `by_op!(op, |o| body)`: `body` with `o` bound to `op`, compiled apart for
/// each common op (a constant there) and once for the others. `body` should
/// call `#[inline(always)]` code for the constants to reach it.
macro_rules! by_op {
    ($op:expr, |$o:ident| $body:expr) => {{
        use iorepro_format::schema::Op;
        match $op {
            Op::Read => {
                let $o = Op::Read;
                $body
            }
            Op::Write => {
                let $o = Op::Write;
                $body
            }
            Op::Open => {
                let $o = Op::Open;
                $body
            }
            Op::Close => {
                let $o = Op::Close;
                $body
            }
            Op::Stat => {
                let $o = Op::Stat;
                $body
            }
            other => {
                let $o = other;
                $body
            }
        }
    }};
}

pub(crate) use by_op;
