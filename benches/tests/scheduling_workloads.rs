//! The bench's workload generator reproduces the reference workloads byte
//! for byte: the pinned lengths and FNV-1a hashes were taken from the files
//! the reference generator (`gen_workload.py`) wrote for the same flags, so
//! figures measured on those files and on `--workload mineru-1000` are
//! measured on the same input.

use rayorch_bench::workload::{GenSpec, fnv1a, generate};

fn check(g: &GenSpec, len: usize, hash: u64) {
    let text = generate(g);
    assert_eq!(
        (text.len(), fnv1a(text.as_bytes())),
        (len, hash),
        "{g:?} differs from the reference output; first 300 bytes: {}",
        &text[..text.len().min(300)]
    );
}

#[test]
fn named_workloads_are_the_reference_files() {
    check(
        &GenSpec::named("mineru-200").unwrap(),
        5731,
        0x504a_f4b7_a593_05a4,
    );
    check(
        &GenSpec::named("mineru-1000").unwrap(),
        26545,
        0x5bee_0889_8dbf_c0b1,
    );
    check(
        &GenSpec::named("failure-1885").unwrap(),
        49335,
        0xa2d1_3f05_5620_699a,
    );
}

#[test]
fn the_paper_scale_workload_is_the_reference_file() {
    check(
        &GenSpec::named("mineru-3689").unwrap(),
        99184,
        0xa852_7656_e8c4_5eca,
    );
}

#[test]
fn other_seeds_samplers_and_wide_seeds_match_too() {
    let g = |preset, n, seed, stratified| GenSpec {
        preset,
        n,
        seed,
        stratified,
        fail_largest: 0,
    };
    check(&g("mineru", 300, 3, false), 8312, 0x60c1_6dbb_5c4e_2d2a);
    check(&g("mineru", 50, 0, true), 1876, 0x3887_2895_7cfb_e3d3);
    check(
        &g("failure", 40, 5_000_000_000, true),
        1609,
        0xae61_da7b_317f_bc80,
    );
}

#[test]
fn unknown_names_are_refused() {
    assert_eq!(GenSpec::named("mineru-0"), None);
    assert_eq!(GenSpec::named("mineru"), None);
    assert_eq!(GenSpec::named("other-10"), None);
}
