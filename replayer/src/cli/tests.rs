use std::path::Path;
use std::time::Duration;

use clap::Parser;

use super::target::url_scheme;
use super::*;
use crate::io::engine::{DirectIo, EngineKind};
use crate::io::objects::ReadMode;
use crate::plan::timing::Timing;
use iorepro_analysis::phases::PhaseKind;
use iorepro_analysis::roles::Role;

#[test]
fn direct_alone_is_every_call_and_takes_reads_after_an_equals() {
    let direct = |args: &[&str]| {
        let all = [["x", "--target", "d"].as_slice(), args].concat();
        let cli = Cli::parse_from(all);
        (cli.trace.clone(), cli.into_options().unwrap().calls.direct)
    };
    assert_eq!(direct(&["t"]).1, DirectIo::Off);
    // A trace named after `--direct` is the trace, not its value.
    assert_eq!(direct(&["--direct", "t"]), ("t".into(), DirectIo::All));
    assert_eq!(direct(&["t", "--direct=reads"]).1, DirectIo::Reads);
    assert!(!DirectIo::Reads.covers(true) && DirectIo::Reads.covers(false));
}

#[test]
fn calls_timeout_and_output_format_are_checked() {
    let o = Cli::parse_from([
        "x",
        "t",
        "--target",
        "d",
        "--timing",
        "0.5",
        "--phases",
        "load,checkpoint",
        "--engine",
        "io_uring",
        "--timeout",
        "2m",
    ])
    .into_options()
    .unwrap();
    assert_eq!(o.calls.timing, Timing::Scaled(0.5));
    assert_eq!(
        o.plan.phases,
        Some(vec![PhaseKind::Load, PhaseKind::Checkpoint])
    );
    assert_eq!(o.calls.engine, EngineKind::IoUring);
    assert_eq!(o.meeting.timeout, Duration::from_secs(120));
    assert_eq!(o.output, OutputFormat::Table);
    let fio = Cli::parse_from(["x", "t", "--target", "d", "--output-format", "fio"]);
    assert_eq!(fio.into_options().unwrap().output, OutputFormat::Fio);
    let json = Cli::parse_from(["x", "t", "--target", "d", "--json"]);
    assert_eq!(json.into_options().unwrap().output, OutputFormat::Json);
    let both = [
        "x",
        "t",
        "--target",
        "d",
        "--json",
        "--output-format",
        "mlperf",
    ];
    assert!(Cli::parse_from(both).into_options().is_err());
}

#[test]
fn live_figures_are_checked() {
    let live = Cli::parse_from([
        "x",
        "t",
        "--target",
        "d",
        "--status-interval",
        "5s",
        "--metrics-addr",
        "127.0.0.1:9464",
        "--metrics-linger",
        "3s",
    ])
    .into_options()
    .unwrap()
    .live;
    assert_eq!(live.status_interval, Some(Duration::from_secs(5)));
    assert_eq!(live.metrics_linger, Duration::from_secs(3));
    assert_eq!(live.metrics_addr.as_deref(), Some("127.0.0.1:9464"));
    assert!(live.lines_on_stderr());
}

#[test]
fn the_plan_and_the_files_replayed_are_checked() {
    let plan = Cli::parse_from([
        "x",
        "t",
        "--plan-only",
        "--ranks",
        "8",
        "--data",
        "replicate",
        "--checkpoint",
        "rank0",
        "--bandwidth",
        "50GiB/s",
        "--checkpoint-bytes",
        "1GiB",
    ])
    .into_options()
    .unwrap();
    assert!(plan.plan_only);
    assert_eq!(
        plan.plan.scale.data,
        crate::plan::scale::DataMode::Replicate
    );
    assert_eq!(
        plan.plan.scale.checkpoint,
        crate::plan::scale::CheckpointMode::Rank0
    );
    assert_eq!(plan.plan.scale.bandwidth, Some(50.0 * (1u64 << 30) as f64));
    assert_eq!(plan.plan.scale.checkpoint_bytes, Some(1 << 30));
    // `--role`, as `iorepro-trace filter` spells it, is `--roles`.
    for flag in ["--roles", "--role"] {
        let o = Cli::parse_from(["x", "t", "--plan-only", flag, "code,all"]);
        assert_eq!(
            o.into_options().unwrap().plan.scope.roles,
            Role::ALL.to_vec()
        );
    }
}

#[test]
fn a_target_is_a_directory_or_a_bucket_and_no_other_url() {
    assert!(
        Cli::try_parse_from(["x", "t"]).is_err(),
        "--target is needed to replay"
    );
    for url in ["gs://b/p", "file:///mnt/x"] {
        let e = Cli::parse_from(["x", "t", "--target", url])
            .into_options()
            .unwrap_err()
            .to_string();
        assert!(e.contains("targets are not served"), "{url}: {e}");
    }
    let s3 = Cli::parse_from([
        "x",
        "t",
        "--target",
        "s3://bench/run1/",
        "--s3-read",
        "whole",
    ])
    .into_options()
    .unwrap();
    let Some(Target::Bucket(o)) = s3.target else {
        panic!("an s3:// target is a bucket, never a local path")
    };
    assert_eq!((o.bucket.as_str(), o.prefix.as_str()), ("bench", "run1"));
    assert_eq!((o.read, o.part_size), (ReadMode::Whole, 8 << 20));
    for bad in [
        ["s3://Bad_Bucket/x", "--s3-retries", "1"],
        ["s3://bench/p", "--s3-part-size", "1MiB"],
        ["s3://bench/p", "--s3-part-size", "6GiB"],
        ["s3://bench/p", "--drop-caches", "--direct"],
    ] {
        let args = [["x", "t", "--target"].as_slice(), &bad].concat();
        assert!(Cli::parse_from(args).into_options().is_err(), "{bad:?}");
    }
    for dir in ["s3:", "./s3:/x", "/mnt/a://b", "d"] {
        assert!(url_scheme(Path::new(dir)).is_none(), "{dir}");
    }
}

#[test]
fn bad_values_are_refused_and_each_listed_word_taken() {
    for bad in [
        ["--phases", "train"],
        ["--timing", "slow"],
        ["--engine", "aio"],
        ["--prepare", "maybe"],
        ["--timeout", "5 parsecs"],
        ["--output-format", "csv"],
        ["--status-interval", "1ms"],
        ["--metrics-linger", "later"],
        ["--data", "stripe"],
        ["--checkpoint", "never"],
        ["--bandwidth", "fast"],
        ["--bandwidth", "0"],
        ["--bandwidth", "0GiB/s"],
        ["--write-bandwidth", "0"],
    ] {
        let args = ["x", "t", "--target", "d", bad[0], bad[1]];
        // Words of a fixed list are refused by clap, the rest when checked.
        let refused = match Cli::try_parse_from(args) {
            Ok(cli) => cli.into_options().is_err(),
            Err(e) => e.kind() == clap::error::ErrorKind::InvalidValue,
        };
        assert!(refused, "{bad:?}");
    }
    for (flag, words) in [
        ("--engine", &["auto", "psync", "io_uring", "io-uring"][..]),
        ("--prepare", &["auto", "only", "skip"]),
        ("--data", &["shard", "replicate"]),
        ("--batch", &["per-rank", "global"]),
        ("--checkpoint", &["auto", "sharded", "rank0", "replicate"]),
        ("--output-format", &["table", "json", "fio", "mlperf"]),
    ] {
        for word in words {
            let args = ["x", "t", "--target", "d", flag, word];
            assert!(Cli::try_parse_from(args).is_ok(), "{flag} {word}");
        }
    }
}

/// `--help` reads in sections: every flag sits in the group of the room it
/// feeds, under that group's heading.
#[test]
fn every_flag_is_shown_under_its_groups_heading() {
    use clap::CommandFactory;
    let cli = Cli::command();
    let headings = [
        "Target and ranks",
        "Object storage (s3:// targets)",
        "What is replayed",
        "Scaling model",
        "Timing and calls",
        "Preparing the target",
        "Rendezvous",
        "Output and report",
        "Live figures",
    ];
    let mut shown = 0;
    for arg in cli.get_arguments().filter(|a| a.get_long().is_some()) {
        let heading = arg.get_help_heading();
        assert!(
            heading.is_some_and(|h| headings.contains(&h)),
            "--{} is under {heading:?}",
            arg.get_long().unwrap()
        );
        shown += 1;
    }
    assert_eq!(shown, 47, "every flag of the command line");
    let help = cli.clone().render_help().to_string();
    let at: Vec<usize> = headings.iter().map(|h| help.find(h).unwrap()).collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "in the rooms' order");
}
