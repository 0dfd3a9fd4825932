//! The per-op live tally both binaries keep: for each op kind the calls, the
//! bytes they moved and the time each took ([`OpFigures`]), the `ops` map of
//! a status line ([`status_map`]) and the three Prometheus families they are
//! scraped as ([`encode_families`]). The collector counts the rows it
//! writes, the replayer the calls it makes and, by request kind rather than
//! op, the requests it sends an object store; each keeps its own figures
//! beside these (rows and lost records; failed calls, stall), through
//! [`KindFigures`].

use std::fmt;

use hdrhistogram::Histogram;
use iorepro_format::Op;
use prometheus_client::encoding::DescriptorEncoder;
use serde_json::{json, Map, Value};

use crate::encode::{self, Buckets};
use crate::status::round;

/// The histogram every per-op latency is kept in, by the collector and the
/// replayer alike: nanoseconds, 1 ns to 1 hour, 2 significant digits (1 %),
/// small enough to keep one per op kind per rank for thousands of ranks.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 3_600_000_000_000, 2).expect("valid histogram bounds")
}

/// One kind's figures.
#[derive(Debug, Clone)]
pub struct OpFigures {
    /// Calls (a run of n calls counts n).
    pub count: u64,
    /// Bytes moved.
    pub bytes: u64,
    /// Time each call took, in ns.
    pub latency_ns: Histogram<u64>,
}

impl Default for OpFigures {
    fn default() -> Self {
        OpFigures {
            count: 0,
            bytes: 0,
            latency_ns: latency_histogram(),
        }
    }
}

impl OpFigures {
    /// One call that moved `bytes` in `latency_ns`.
    pub fn record(&mut self, bytes: u64, latency_ns: u64) {
        self.record_run(1, bytes, latency_ns);
    }

    /// A run of `calls` calls (at least one) that moved `bytes` in
    /// `total_ns` together: each call counts the run's mean time.
    pub fn record_run(&mut self, calls: u64, bytes: u64, total_ns: u64) {
        let calls = calls.max(1);
        self.count += calls;
        self.bytes += bytes;
        let mean = (total_ns / calls).max(1);
        self.latency_ns.saturating_record_n(mean, calls);
    }

    /// This kind's entry of a status line: totals so far, calls per second
    /// over the interval, and the p99 latency of the interval's calls (null
    /// with no calls). `then` is the kind's figures at the interval's start
    /// (none if it had not been seen).
    pub fn status_entry(&self, then: Option<&OpFigures>, interval_s: f64) -> Value {
        let mut recent = self.latency_ns.clone();
        if let Some(before) = then {
            // Cumulative histograms only grow, so this cannot fail; a
            // failure would only cost this line its p99.
            let _ = recent.subtract(&before.latency_ns);
        }
        let count_then = then.map_or(0, |t| t.count);
        let per_s = if interval_s > 0.0 {
            self.count.saturating_sub(count_then) as f64 / interval_s
        } else {
            0.0
        };
        let p99_us =
            (!recent.is_empty()).then(|| round(recent.value_at_quantile(0.99) as f64 / 1e3));
        json!({
            "count": self.count,
            "bytes": self.bytes,
            "ops_s": round(per_s),
            "p99_us": p99_us,
        })
    }
}

/// What a tally keeps for each kind: the shared [`OpFigures`], and whatever
/// a binary adds of its own beside them.
pub trait KindFigures: Clone + Default {
    fn figures(&self) -> &OpFigures;
    /// Adds another's figures (another rank's, say) to these.
    fn merge(&mut self, other: &Self);
}

impl KindFigures for OpFigures {
    fn figures(&self) -> &OpFigures {
        self
    }

    fn merge(&mut self, other: &OpFigures) {
        self.count += other.count;
        self.bytes += other.bytes;
        self.latency_ns
            .add(&other.latency_ns)
            .expect("histograms share bounds");
    }
}

/// Figures per op kind, kept by `Op` so counting a call costs no lookup by
/// name; a kind appears on its first call.
#[derive(Debug, Clone)]
pub struct OpTally<F = OpFigures> {
    ops: Vec<Option<F>>,
}

impl<F: KindFigures> Default for OpTally<F> {
    fn default() -> Self {
        OpTally {
            ops: vec![None; Op::ALL.len()],
        }
    }
}

impl<F: KindFigures> OpTally<F> {
    /// The figures of `op`, made on its first call.
    pub fn entry(&mut self, op: Op) -> &mut F {
        self.ops[op as usize].get_or_insert_with(F::default)
    }

    pub fn get(&self, op: Op) -> Option<&F> {
        self.ops[op as usize].as_ref()
    }

    /// The op kinds seen, by name, in `Op` order.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &F)> + Clone {
        self.ops
            .iter()
            .enumerate()
            .filter_map(|(i, f)| Some((Op::ALL[i].as_str(), f.as_ref()?)))
    }

    /// Bytes moved by `op`'s calls so far.
    pub fn bytes(&self, op: Op) -> u64 {
        self.get(op).map_or(0, |f| f.figures().bytes)
    }

    pub fn merge(&mut self, other: &OpTally<F>) {
        for (mine, theirs) in self.ops.iter_mut().zip(&other.ops) {
            if let Some(t) = theirs {
                mine.get_or_insert_with(F::default).merge(t);
            }
        }
    }

    /// The `ops` map of a status line, rates over the interval since `prev`.
    pub fn status_map(&self, prev: &OpTally<F>, interval_s: f64) -> Map<String, Value> {
        let then = |name: &str| prev.get(Op::parse(name));
        status_map(self.iter(), then, interval_s)
    }
}

/// The map of a status line with one [`OpFigures::status_entry`] per kind
/// of `now`, against the figures `then` gives for it at the interval's
/// start.
pub fn status_map<'k, 'a, 'b, F: KindFigures + 'a + 'b>(
    now: impl IntoIterator<Item = (&'k str, &'a F)>,
    then: impl Fn(&str) -> Option<&'b F>,
    interval_s: f64,
) -> Map<String, Value> {
    now.into_iter()
        .map(|(name, f)| {
            let before = then(name).map(KindFigures::figures);
            (
                name.to_string(),
                f.figures().status_entry(before, interval_s),
            )
        })
        .collect()
}

/// The names and help of the three families a tally is scraped as: calls,
/// bytes and latency, each labelled by kind. Counter names go without
/// `_total` (the encoder adds it).
#[derive(Debug, Clone, Copy)]
pub struct Families {
    /// The label that tells the kinds apart (`op`, `kind`).
    pub label: &'static str,
    pub calls: (&'static str, &'static str),
    pub bytes: (&'static str, &'static str),
    pub latency: (&'static str, &'static str),
}

/// Writes the three families of `families` for the kinds of `figures`.
pub fn encode_families<'k, 'a, F: KindFigures + 'a>(
    enc: &mut DescriptorEncoder,
    families: &Families,
    figures: impl IntoIterator<Item = (&'k str, &'a F)> + Clone,
) -> fmt::Result {
    let of = |pick: fn(&OpFigures) -> u64| {
        figures
            .clone()
            .into_iter()
            .map(move |(k, f)| (k, pick(f.figures())))
    };
    let (name, help) = families.calls;
    encode::counters_by(enc, name, help, families.label, of(|f| f.count))?;
    let (name, help) = families.bytes;
    encode::counters_by(enc, name, help, families.label, of(|f| f.bytes))?;
    let buckets: Vec<(&str, Buckets)> = figures
        .into_iter()
        .map(|(k, f)| (k, Buckets::from_latency_ns(&f.figures().latency_ns)))
        .collect();
    let (name, help) = families.latency;
    encode::histograms_by(
        enc,
        name,
        help,
        families.label,
        buckets.iter().map(|(k, b)| (*k, b)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::collector::Collector;
    use prometheus_client::registry::Registry;

    #[test]
    fn runs_count_each_call_at_their_mean() {
        let mut f = OpFigures::default();
        // 1,024 reads of 1 MiB taking 100 µs each, as one run.
        f.record_run(1024, 1 << 30, 102_400_000);
        f.record(4096, 0);
        assert_eq!((f.count, f.bytes), (1025, (1 << 30) + 4096));
        let p50 = f.latency_ns.value_at_quantile(0.5);
        assert!((99_000..=101_000).contains(&p50), "{p50}");
        // A call too fast to time counts as 1 ns, not as nothing.
        assert_eq!(f.latency_ns.min(), 1);
        assert_eq!(f.latency_ns.len(), 1025);
    }

    #[test]
    fn status_entries_measure_the_interval() {
        let mut prev = OpTally::<OpFigures>::default();
        for _ in 0..10 {
            prev.entry(Op::Read).record(1 << 20, 50_000_000);
        }
        let mut now = prev.clone();
        now.entry(Op::Read).record_run(1024, 1 << 30, 102_400_000);
        now.entry(Op::Open).record(0, 5_000);
        let map = now.status_map(&prev, 2.0);
        assert_eq!(map["read"]["count"], 1034);
        assert_eq!(map["read"]["ops_s"], 512.0);
        let p99 = map["read"]["p99_us"].as_f64().unwrap();
        assert!((99.0..=101.0).contains(&p99), "{p99}");
        assert_eq!(map["open"]["ops_s"], 0.5);
        assert_eq!(map["open"]["bytes"], 0);
        let quiet = now.status_map(&now, 1.0);
        assert_eq!(quiet["read"]["p99_us"], Value::Null);
        assert_eq!(quiet["read"]["ops_s"], 0.0);
        assert_eq!(now.bytes(Op::Read), (1 << 30) + (10 << 20));
        assert_eq!(now.bytes(Op::Write), 0);
    }

    #[test]
    fn tallies_merge_kind_by_kind() {
        let mut a = OpTally::<OpFigures>::default();
        a.entry(Op::Read).record(100, 1_000);
        let mut b = OpTally::<OpFigures>::default();
        b.entry(Op::Read).record(50, 3_000);
        b.entry(Op::Fsync).record(0, 9_000);
        a.merge(&b);
        let kinds: Vec<(&str, u64, u64)> = a
            .iter()
            .map(|(k, f)| (k, f.count, f.latency_ns.len()))
            .collect();
        assert_eq!(kinds, [("read", 2, 2), ("fsync", 1, 1)]);
        assert_eq!(a.bytes(Op::Read), 150);
    }

    #[derive(Debug)]
    struct Scraped(OpTally);

    impl Collector for Scraped {
        fn encode(&self, mut enc: DescriptorEncoder) -> fmt::Result {
            let families = Families {
                label: "op",
                calls: ("x_ops", "Calls."),
                bytes: ("x_bytes", "Bytes."),
                latency: ("x_latency_seconds", "Latency."),
            };
            encode_families(&mut enc, &families, self.0.iter())
        }
    }

    #[test]
    fn the_three_families() {
        let mut t = OpTally::<OpFigures>::default();
        t.entry(Op::Write).record_run(3, 3 << 20, 6_000_000);
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scraped(t)));
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
        for line in [
            "# TYPE x_ops counter",
            "x_ops_total{op=\"write\"} 3",
            "x_bytes_total{op=\"write\"} 3145728",
            "x_latency_seconds_bucket{le=\"0.0025\",op=\"write\"} 3",
            "x_latency_seconds_count{op=\"write\"} 3",
        ] {
            assert!(text.lines().any(|l| l == line), "{line} missing in\n{text}");
        }
    }
}
