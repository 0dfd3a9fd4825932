//! Helpers for iorepro's end-to-end tests, which drive the real binaries
//! (`iorepro-collect`, `iorepro-trace`, `iorepro-replay`) over real workloads.
//!
//! [`anon`] holds what tests of anonymized traces share;
//! [`browser`] opens a page in headless Chromium and reads back what it shows;
//! [`bins`] finds the workspace and its built binaries and runs them;
//! [`job`] generates a training dataset and launches the PyTorch job in
//! `tests/jobs/` under torchrun; [`capture`] says whether this machine can
//! load the probes and runs a job under the collector; [`rows`] reads a
//! trace back into plain rows so tests can total bytes by path, process and
//! rank; [`samples`] names the bundled traces in `traces/samples/`;
//! [`slurm`] runs a single-node Slurm cluster for a test, and [`http`] asks
//! HTTP endpoints (a metrics endpoint, Prometheus's API); [`s3`] runs an S3
//! API server for a test, and [`rgw`] a real S3 store (Ceph's RADOS
//! Gateway); [`python`] runs a Python snippet as an independent judge of a
//! trace; [`skip`] is what a
//! test does when the machine cannot run it (under CI, it fails), and
//! [`timing`] judges a run against time bounds on a shared machine.

pub mod anon;
pub mod bins;
pub mod browser;
pub mod capture;
pub mod dlio;
pub mod http;
pub mod job;
pub mod loop_mount;
pub mod python;
pub mod rgw;
pub mod rows;
pub mod s3;
pub mod samples;
pub mod skip;
pub mod slurm;
pub mod timing;
