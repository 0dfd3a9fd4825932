//! Loads the probes and turns kernel events into trace rows.
