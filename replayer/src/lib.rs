//! Plans, prepares and executes a scaled replay of a trace.
