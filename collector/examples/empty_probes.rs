//! Attaches empty programs to the raw syscall hooks the collector uses and
//! holds them until its standard input closes: what any tracer on these
//! hooks costs a job at least (the floor `cargo xtask bench` reports next to
//! the collector's own cost).

use std::io::Read;

fn main() -> anyhow::Result<()> {
    let _floor = iorepro_collector::probes::load_floor()?;
    println!("attached");
    let mut sink = Vec::new();
    std::io::stdin().read_to_end(&mut sink)?;
    Ok(())
}
