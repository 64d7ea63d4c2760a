//! `strata bench paper004 --quick` runs every part of seed 004's
//! experiments once — Figure 5 for every graph in memory and over a veth
//! pair of its own namespaces (root, as every real-link test), Figures 6
//! and 7, smoltcp — draws its plots and ends with the ratio lines.

use std::process::Command;

const STRATA: &str = env!("CARGO_BIN_EXE_strata");

#[test]
fn paper004_runs_every_part_and_ends_with_the_ratio_lines() {
    let dir = std::env::temp_dir().join(format!("p4plots-{}", std::process::id()));
    let out = Command::new(STRATA)
        .args(["bench", "paper004", "--quick", "--plots"])
        .arg(&dir)
        .output()
        .expect("strata runs");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for graph in [
        "atp/ddp/eth",
        "atp@bsd/ddp@streams/eth",
        "atp@streams/ddp@bsd/eth",
    ] {
        let row = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{graph} ")))
            .unwrap_or_else(|| panic!("no Figure 5 row for {graph}:\n{stdout}"));
        let numbers: Vec<f64> = row
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        assert!(
            numbers.len() == 3 && numbers[0] > 0.0 && numbers[1] > 0.0,
            "memory and veth rates: {row}"
        );
    }
    assert!(stdout.contains("Figure 6"), "{stdout}");
    assert!(stdout.contains("Figure 7b"), "{stdout}");
    let last: Vec<&str> = stdout
        .lines()
        .rev()
        .take_while(|l| l.starts_with("ratio "))
        .collect();
    for want in [
        "ratio imported/native ddp@bsd-in-streams send = ",
        "ratio imported/native atp@bsd-in-streams receive = ",
        "ratio smoltcp-in-strata/smoltcp = ",
    ] {
        assert!(
            last.iter().any(|l| l.starts_with(want)),
            "{want} among the last lines:\n{stdout}"
        );
    }
    for png in ["paper004_fig5.png", "paper004_fig6.png"] {
        let meta = std::fs::metadata(dir.join(png)).expect("the plot exists");
        assert!(meta.len() > 1000, "{png} is an image");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
