//! Ranks: who this process is and where the ranks meet.
pub mod launcher;
pub mod layout;
pub mod rendezvous;
