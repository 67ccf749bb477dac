//! The ready queue's unit tests.
use super::*;

fn entry(entity: u32) -> Entry {
    Entry {
        entity,
        epoch: 0,
        generation: 1,
        at: 0,
    }
}

fn take(q: &mut CallQueues, max: usize) -> Vec<u32> {
    let mut touched = 0;
    match q.reserve(max, 0, false, |_| true, |_| 0, &mut touched) {
        Reserved::Batch(es, _) => es.iter().map(|e| e.entity).collect(),
        other => panic!("expected a batch, got {other:?}"),
    }
}

/// The order key of a bucket that is pushed to several times in a row
/// enters the ordered set once, and reservations still see every push:
/// a parent with fewer queued Grains goes first, a bucket reopened
/// later is born at the later dispatch clock.
#[test]
fn runs_of_pushes_for_one_parent_order_as_single_pushes() {
    let mut q = CallQueues::new(1, Reservation::NearestCompletion, None);
    let (a, b) = (Some((0, 0)), Some((1, 0)));
    for e in 0..3 {
        q.push(entry(e), a, 0);
    }
    q.push(entry(3), b, 0);
    q.push(entry(4), a, 0);
    // A: born 0, 4 queued (key 8); B: born 0, 1 queued (key 2).
    assert_eq!(take(&mut q, 2), vec![3, 0]);
    // B reopens at clock 2 with one Grain (key 4); A has 3 left (key 6).
    q.push(entry(5), b, 0);
    assert_eq!(take(&mut q, 1), vec![5]);
    assert_eq!(take(&mut q, 8), vec![1, 2, 4]);
}

/// A push for a reused parent slot (a newer epoch) while the old
/// parent's bucket is still open drops the old parent's entries.
#[test]
fn a_recycled_parent_slot_replaces_the_open_bucket() {
    let mut q = CallQueues::new(1, Reservation::NearestCompletion, None);
    q.push(entry(0), Some((0, 0)), 0);
    q.push(entry(1), Some((0, 0)), 0);
    q.push(entry(2), Some((0, 1)), 0);
    assert_eq!(q.len_upper_bound(), 1);
    assert_eq!(take(&mut q, 8), vec![2]);
}

/// A parent whose first batch (its probe) is out is passed over for other
/// parents' Grains until a report of it commits; when only parents with a
/// probe out have Grains queued, the nearest of them is served (a probe
/// never leaves a batch short).
#[test]
fn a_parent_with_its_probe_out_waits_for_its_report_unless_nothing_else_is_queued() {
    let mut q = CallQueues::new(1, Reservation::NearestCompletion, None);
    let (a, b) = (Some((0, 0)), Some((1, 0)));
    for e in 0..4 {
        q.push(entry(e), a, 0);
    }
    for e in 4..8 {
        q.push(entry(e), b, 0);
    }
    // Equal keys: the older bucket (A) goes first; that batch is A's probe.
    assert_eq!(take(&mut q, 2), vec![0, 1]);
    assert_eq!(take(&mut q, 2), vec![4, 5], "A's probe is out: B's Grains go");
    assert_eq!(take(&mut q, 1), vec![2], "both out: the nearest completion");
    q.reported(1, 0);
    assert_eq!(take(&mut q, 1), vec![6], "B's report came: B goes before A");
    assert_eq!(take(&mut q, 8), vec![7, 3], "A fills what B leaves");
    // A reused slot (a newer epoch) starts with no probe out.
    q.push(entry(8), Some((0, 1)), 0);
    q.push(entry(9), b, 0);
    assert_eq!(take(&mut q, 1), vec![8]);
}
