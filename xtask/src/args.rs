//! The command line of `cargo xtask`, read in full before anything runs: a
//! mistyped flag or a flag without its value is a one-line error naming the
//! flags the command accepts, with exit status 2, rather than an option that
//! is silently not applied to a long run (a `test` that still runs setup, a
//! `bench` that runs every benchmark).

use std::fmt;

/// What `cargo xtask` was asked to do.
#[derive(Debug, PartialEq)]
pub enum Cmd {
    Setup,
    Test {
        setup: bool,
        /// Seconds per fuzz target, when fuzzing is asked for.
        fuzz: Option<u64>,
    },
    /// `--rooms`: the rooms rule of each crate's `lib.rs` too.
    Imports {
        rooms: bool,
    },
    BuildEbpf,
    Demo,
    Dist,
    Bench {
        quick: bool,
        only: Option<Vec<String>>,
        analysis_rows: Option<u64>,
    },
    Help,
}

/// A mistake on the command line: one line, exit status 2.
#[derive(Debug, PartialEq)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The exit status of a usage mistake, as for the project's other tools.
pub const USAGE_EXIT: i32 = 2;

/// A flag a command accepts, with the name of its value if it takes one.
type Flag = (&'static str, Option<&'static str>);

const TEST_FLAGS: &[Flag] = &[("--no-setup", None), ("--fuzz", Some("SECONDS"))];
const IMPORTS_FLAGS: &[Flag] = &[("--rooms", None)];
const BENCH_FLAGS: &[Flag] = &[
    ("--quick", None),
    ("--only", Some("NAME,...")),
    ("--analysis-rows", Some("N")),
];

const COMMANDS: &str = "setup, test, imports, build-ebpf, demo, dist, bench";

/// Reads `cargo xtask`'s arguments (without the program name). Benchmark
/// names given to `--only` are checked with `check_bench`.
pub fn parse(
    args: &[String],
    check_bench: impl Fn(&[String]) -> anyhow::Result<()>,
) -> Result<Cmd, UsageError> {
    let Some(command) = args.first() else {
        return Ok(Cmd::Help);
    };
    let rest = &args[1..];
    let cmd = command.as_str();
    match cmd {
        "-h" | "--help" => Ok(Cmd::Help),
        "setup" | "build-ebpf" | "demo" | "dist" => {
            flags(cmd, &[], rest)?;
            Ok(match cmd {
                "setup" => Cmd::Setup,
                "build-ebpf" => Cmd::BuildEbpf,
                "demo" => Cmd::Demo,
                _ => Cmd::Dist,
            })
        }
        "test" => {
            let mut setup = true;
            let mut fuzz = None;
            for (flag, value) in flags(cmd, TEST_FLAGS, rest)? {
                match (flag, value) {
                    ("--no-setup", _) => setup = false,
                    (_, Some(v)) => {
                        fuzz = Some(v.parse().map_err(|_| {
                            UsageError(format!(
                                "test: --fuzz takes a number of seconds (got `{v}`)"
                            ))
                        })?)
                    }
                    _ => unreachable!("flags() gives --fuzz its value"),
                }
            }
            Ok(Cmd::Test { setup, fuzz })
        }
        "imports" => {
            let rooms = !flags(cmd, IMPORTS_FLAGS, rest)?.is_empty();
            Ok(Cmd::Imports { rooms })
        }
        "bench" => {
            let mut quick = false;
            let mut only = None;
            let mut analysis_rows = None;
            for (flag, value) in flags(cmd, BENCH_FLAGS, rest)? {
                match (flag, value) {
                    ("--quick", _) => quick = true,
                    ("--only", Some(v)) => {
                        let names: Vec<String> = v.split(',').map(str::to_string).collect();
                        check_bench(&names).map_err(|e| UsageError(format!("bench: {e}")))?;
                        only = Some(names);
                    }
                    (_, Some(v)) => {
                        analysis_rows = Some(v.replace('_', "").parse().map_err(|_| {
                            UsageError(format!(
                                "bench: --analysis-rows takes a number of rows (got `{v}`)"
                            ))
                        })?)
                    }
                    _ => unreachable!("flags() gives value flags their value"),
                }
            }
            Ok(Cmd::Bench {
                quick,
                only,
                analysis_rows,
            })
        }
        other => Err(UsageError(format!(
            "unknown command `{other}` (commands: {COMMANDS}; --help for more)"
        ))),
    }
}

/// The flags of `args`, in order, each with its value if it takes one; the
/// first argument that is not one of `accepted`, or a value flag with
/// nothing after it, is an error listing what `command` accepts.
fn flags<'a>(
    command: &str,
    accepted: &[Flag],
    args: &'a [String],
) -> Result<Vec<(&'static str, Option<&'a str>)>, UsageError> {
    let listing = || {
        if accepted.is_empty() {
            format!("{command} takes no flags")
        } else {
            let all: Vec<String> = accepted
                .iter()
                .map(|(f, v)| match v {
                    Some(v) => format!("{f} {v}"),
                    None => f.to_string(),
                })
                .collect();
            format!("accepted: {}", all.join(", "))
        }
    };
    let mut found = Vec::new();
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(&(flag, value)) = accepted.iter().find(|(f, _)| f == arg) else {
            let what = if arg.starts_with('-') {
                "unknown flag"
            } else {
                "unexpected argument"
            };
            return Err(UsageError(format!(
                "{command}: {what} `{arg}` ({})",
                listing()
            )));
        };
        match value {
            None => found.push((flag, None)),
            Some(_) => match it.next() {
                Some(v) if !v.starts_with("--") => found.push((flag, Some(v.as_str()))),
                _ => {
                    return Err(UsageError(format!(
                        "{command}: `{flag}` needs a value ({})",
                        listing()
                    )))
                }
            },
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_args(args: &[&str]) -> Result<Cmd, UsageError> {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        parse(&args, |names| {
            match names
                .iter()
                .find(|n| !["collector", "analysis"].contains(&n.as_str()))
            {
                Some(n) => anyhow::bail!("no benchmark `{n}` (there are: collector, analysis)"),
                None => Ok(()),
            }
        })
    }

    fn error(args: &[&str]) -> String {
        match parse_args(args) {
            Err(UsageError(e)) => {
                assert!(!e.contains('\n'), "one line: {e}");
                e
            }
            Ok(cmd) => panic!("{args:?} was accepted as {cmd:?}"),
        }
    }

    #[test]
    fn accepted_flags_parse() {
        assert_eq!(parse_args(&[]), Ok(Cmd::Help));
        assert_eq!(parse_args(&["--help"]), Ok(Cmd::Help));
        assert_eq!(parse_args(&["setup"]), Ok(Cmd::Setup));
        assert_eq!(parse_args(&["build-ebpf"]), Ok(Cmd::BuildEbpf));
        assert_eq!(parse_args(&["demo"]), Ok(Cmd::Demo));
        assert_eq!(parse_args(&["dist"]), Ok(Cmd::Dist));
        assert_eq!(parse_args(&["imports"]), Ok(Cmd::Imports { rooms: false }));
        assert_eq!(
            parse_args(&["imports", "--rooms"]),
            Ok(Cmd::Imports { rooms: true })
        );
        assert_eq!(
            parse_args(&["test"]),
            Ok(Cmd::Test {
                setup: true,
                fuzz: None
            })
        );
        assert_eq!(
            parse_args(&["test", "--fuzz", "30", "--no-setup"]),
            Ok(Cmd::Test {
                setup: false,
                fuzz: Some(30)
            })
        );
        assert_eq!(
            parse_args(&[
                "bench",
                "--quick",
                "--only",
                "collector,analysis",
                "--analysis-rows",
                "2_000_000"
            ]),
            Ok(Cmd::Bench {
                quick: true,
                only: Some(vec!["collector".into(), "analysis".into()]),
                analysis_rows: Some(2_000_000),
            })
        );
    }

    #[test]
    fn unknown_flags_are_refused_naming_the_accepted_ones() {
        assert_eq!(
            error(&["test", "--no-setpu"]),
            "test: unknown flag `--no-setpu` (accepted: --no-setup, --fuzz SECONDS)"
        );
        assert_eq!(
            error(&["bench", "--quick", "--onyl", "collector"]),
            "bench: unknown flag `--onyl` (accepted: --quick, --only NAME,..., \
             --analysis-rows N)"
        );
        assert_eq!(
            error(&["bench", "collector"]),
            "bench: unexpected argument `collector` (accepted: --quick, --only NAME,..., \
             --analysis-rows N)"
        );
        for cmd in ["setup", "build-ebpf", "demo", "dist"] {
            assert_eq!(
                error(&[cmd, "--quick"]),
                format!("{cmd}: unknown flag `--quick` ({cmd} takes no flags)")
            );
        }
        assert_eq!(
            error(&["tset"]),
            "unknown command `tset` (commands: setup, test, imports, build-ebpf, demo, dist, \
             bench; --help for more)"
        );
    }

    #[test]
    fn missing_and_bad_values_are_refused() {
        assert_eq!(
            error(&["test", "--fuzz"]),
            "test: `--fuzz` needs a value (accepted: --no-setup, --fuzz SECONDS)"
        );
        assert!(
            error(&["test", "--fuzz", "--no-setup"]).starts_with("test: `--fuzz` needs a value")
        );
        assert!(error(&["bench", "--only"]).starts_with("bench: `--only` needs a value"));
        assert!(error(&["bench", "--analysis-rows"]).starts_with("bench: `--analysis-rows` needs"));
        assert_eq!(
            error(&["test", "--fuzz", "soon"]),
            "test: --fuzz takes a number of seconds (got `soon`)"
        );
        assert_eq!(
            error(&["bench", "--analysis-rows", "many"]),
            "bench: --analysis-rows takes a number of rows (got `many`)"
        );
        assert_eq!(
            error(&["bench", "--only", "collector,replay"]),
            "bench: no benchmark `replay` (there are: collector, analysis)"
        );
    }
}
