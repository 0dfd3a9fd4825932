//! Ranks: who this process is, which ranks it runs, and where the ranks meet.
//!
//! [`launcher`] reads this process's rank and the world size from the
//! environment a launcher sets (Slurm, Open MPI, MPICH/PMI, torchrun), or
//! finds none; [`layout`] settles which ranks the process runs (the
//! launcher's one, or every rank as a thread, spread over nodes for the
//! report); [`rendezvous`] is where they meet: barriers, the abort of a
//! failed run, and the gathering of the results, between threads of one
//! process, through files in a rendezvous directory, or through MPI.
//!
//! Hands `execute` the barriers its ranks meet at, and `report`, on the
//! process that prints it, every rank's
//! [`crate::report::stats::RankResult`].
pub mod launcher;
pub mod layout;
pub mod rendezvous;
