//! Runs one seed-003 workload for an instruction count under callgrind:
//! `paper003_probe rtt|stream|untimed on|off N` (see
//! `crates/strata-pa/scripts/profile`); `untimed`: round trips without the
//! bench's clock reads and samples.

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: paper003_probe rtt|stream|untimed on|off N";
    let (Some(what), Some(pa), Some(n)) = (args.get(1), args.get(2), args.get(3)) else {
        anyhow::bail!(usage);
    };
    let n: usize = n.parse()?;
    let mut d = strata_bench::paper003::Duo::new(pa == "on")?;
    d.virtual_clock();
    // The same warm-up whatever N: set-up cancels out between N and 2N.
    if what == "untimed" {
        strata_bench::paper003::exercise_untimed(&mut d, 200);
        strata_bench::paper003::exercise_untimed(&mut d, n);
        return Ok(());
    }
    strata_bench::paper003::exercise(&mut d, what == "rtt", 200);
    strata_bench::paper003::exercise(&mut d, what == "rtt", n);
    Ok(())
}
