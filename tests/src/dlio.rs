//! DLIO 2.0.0, MLPerf Storage's benchmark, as `cargo xtask setup` installs
//! it (a venv of its own under `$HOME/.cache/iorepro/dlio-2.0.0`; see
//! xtask's `setup::dlio`), run under Open MPI's `mpirun`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::skip::cannot_run;

/// Where setup puts DLIO's venv, under `$HOME`.
const VENV: &str = ".cache/iorepro/dlio-2.0.0";

/// DLIO's command, found.
pub struct Dlio {
    bin: PathBuf,
}

impl Dlio {
    /// DLIO and `mpirun`, or `None` after [`cannot_run`] says which is
    /// missing.
    pub fn find() -> Option<Dlio> {
        let home = std::env::var_os("HOME").unwrap_or_default();
        let venv = Path::new(&home).join(VENV);
        let ready = Command::new(venv.join("bin/python"))
            .args(["-c", "import dlio_benchmark.main"])
            .output()
            .is_ok_and(|o| o.status.success());
        if !ready {
            cannot_run(format!(
                "DLIO 2.0.0 is not installed in {} (`cargo xtask setup` installs it)",
                venv.display()
            ));
            return None;
        }
        let mpirun = Command::new("mpirun").arg("--version").output();
        if !mpirun.is_ok_and(|o| o.status.success()) {
            cannot_run("mpirun is not installed (apt package openmpi-bin; `cargo xtask setup`)");
            return None;
        }
        Some(Dlio {
            bin: venv.join("bin/dlio_benchmark"),
        })
    }

    /// `mpirun -np NP dlio_benchmark --config-dir CONF workload=NAME
    /// ++workload.output.folder=OUT` and `more` overrides, as argv. Hydra
    /// writes the run's configuration into `OUT/dlio_config`, as MLPerf
    /// Storage's `mlpstorage` has it (not into `./hydra_log`).
    pub fn command(
        &self,
        np: u32,
        conf: &Path,
        name: &str,
        out: &Path,
        more: &[&str],
    ) -> Vec<String> {
        let mut argv: Vec<String> = [
            "mpirun",
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
            "-np",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        argv.push(np.to_string());
        argv.push(self.bin.display().to_string());
        argv.push("--config-dir".into());
        argv.push(conf.display().to_string());
        argv.push(format!("workload={name}"));
        argv.push(format!("++workload.output.folder={}", out.display()));
        argv.push(format!("++hydra.run.dir={}", out.display()));
        argv.push("++hydra.output_subdir=dlio_config".into());
        argv.extend(more.iter().map(|s| s.to_string()));
        argv
    }

    /// The venv's Python, which has PyYAML (DLIO reads its configuration with it).
    pub fn python(&self) -> PathBuf {
        self.bin.with_file_name("python")
    }

    /// Writes workload `name` (`yaml`) into `ROOT/conf/workload/NAME.yaml`
    /// and makes its dataset at `np` processes; returns the config folder.
    pub fn prepare(&self, np: u32, root: &Path, name: &str, yaml: &str) -> PathBuf {
        let conf = root.join("conf");
        std::fs::create_dir_all(conf.join("workload")).unwrap();
        std::fs::write(conf.join(format!("workload/{name}.yaml")), yaml).unwrap();
        self.generate(np, &conf, name, &root.join("gen"));
        conf
    }

    /// Makes the dataset of workload `name` in `conf` (DLIO's generation
    /// step, at `np` processes).
    pub fn generate(&self, np: u32, conf: &Path, name: &str, out: &Path) {
        let argv = self.command(
            np,
            conf,
            name,
            out,
            &[
                "++workload.workflow.generate_data=True",
                "++workload.workflow.train=False",
                "++workload.workflow.checkpoint=False",
            ],
        );
        let o = Command::new(&argv[0])
            .args(&argv[1..])
            .output()
            .expect("run mpirun");
        assert!(
            o.status.success(),
            "DLIO's generation failed: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

/// Each epoch's duration in seconds, from DLIO's own `per_epoch_stats.json`
/// in `out`.
pub fn epoch_durations(out: &Path) -> Vec<f64> {
    let text = std::fs::read_to_string(out.join("per_epoch_stats.json"))
        .unwrap_or_else(|e| panic!("{}: {e}", out.display()));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut epochs: Vec<(u64, f64)> = v
        .as_object()
        .unwrap()
        .iter()
        .filter_map(|(k, e)| {
            let d = e.get("duration")?;
            let d = d.as_f64().or_else(|| d.as_str()?.parse().ok())?;
            Some((k.parse().ok()?, d))
        })
        .collect();
    epochs.sort_by_key(|e| e.0);
    epochs.into_iter().map(|e| e.1).collect()
}
