//! Reading order of a page's regions: columns found from the region boxes,
//! top to bottom within a column, columns left to right.
//!
//! Invariants:
//! - Pure: boxes in, a permutation of their indices out (every index once).
//! - A *wide* region (spanning more than half the width covered by all
//!   regions, e.g. a title over two columns or a full-width table) cuts the
//!   page into horizontal bands; it is read after everything above it and
//!   before everything below it.
//! - Inside a band, regions whose x-ranges overlap belong to one column
//!   (transitively); columns are read left to right, each top to bottom.
//!   Ordering by raw y instead would interleave the lines of two columns.

/// The order to read `boxes` (`[x0, y0, x1, y1]`, y down) in.
///
/// ```
/// use rayorch_models::layout::reading_order::reading_order;
/// // A title over two columns of two paragraphs each.
/// let boxes = [
///     [320.0, 100.0, 560.0, 300.0], // right column, top
///     [40.0, 20.0, 560.0, 60.0],    // title
///     [40.0, 320.0, 280.0, 500.0],  // left column, bottom
///     [40.0, 100.0, 280.0, 300.0],  // left column, top
///     [320.0, 320.0, 560.0, 500.0], // right column, bottom
/// ];
/// assert_eq!(reading_order(&boxes), vec![1, 3, 2, 0, 4]);
/// ```
pub fn reading_order(boxes: &[[f32; 4]]) -> Vec<usize> {
    if boxes.is_empty() {
        return Vec::new();
    }
    let left = boxes.iter().map(|b| b[0]).fold(f32::MAX, f32::min);
    let right = boxes.iter().map(|b| b[2]).fold(f32::MIN, f32::max);
    let span = (right - left).max(1.0);
    let wide = |i: usize| (boxes[i][2] - boxes[i][0]) > 0.5 * span;
    let mut by_y: Vec<usize> = (0..boxes.len()).collect();
    by_y.sort_by(|&a, &b| {
        boxes[a][1]
            .total_cmp(&boxes[b][1])
            .then(boxes[a][0].total_cmp(&boxes[b][0]))
    });

    let mut out = Vec::with_capacity(boxes.len());
    let mut band: Vec<usize> = Vec::new();
    for i in by_y {
        if wide(i) {
            out.extend(order_band(boxes, std::mem::take(&mut band)));
            out.push(i);
        } else {
            band.push(i);
        }
    }
    out.extend(order_band(boxes, band));
    out
}

/// Columns of one band (no wide region inside), each top to bottom.
fn order_band(boxes: &[[f32; 4]], band: Vec<usize>) -> Vec<usize> {
    // Union of overlapping x-ranges, by a sweep over the boxes sorted by x0.
    let mut by_x = band;
    by_x.sort_by(|&a, &b| boxes[a][0].total_cmp(&boxes[b][0]));
    let mut columns: Vec<(f32, Vec<usize>)> = Vec::new();
    for i in by_x {
        // A small overlap (ragged right edges) does not merge two columns.
        let tolerance = 0.1 * (boxes[i][2] - boxes[i][0]);
        match columns.last_mut() {
            Some((end, members)) if boxes[i][0] + tolerance < *end => {
                *end = end.max(boxes[i][2]);
                members.push(i);
            }
            _ => columns.push((boxes[i][2], vec![i])),
        }
    }
    columns
        .into_iter()
        .flat_map(|(_, mut members)| {
            members.sort_by(|&a, &b| boxes[a][1].total_cmp(&boxes[b][1]));
            members
        })
        .collect()
}

/// Inversions between consecutive items: how many adjacent pairs of `order`
/// (positions into the true sequence) go backwards. The reading-order error
/// of the corpus tests is this count over `order.len() - 1`.
///
/// ```
/// assert_eq!(rayorch_models::layout::reading_order::adjacent_inversions(&[0, 2, 1, 3]), 1);
/// ```
pub fn adjacent_inversions(order: &[usize]) -> usize {
    order.windows(2).filter(|w| w[1] < w[0]).count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_permutation(order: &[usize], n: usize) -> bool {
        let mut s = order.to_vec();
        s.sort_unstable();
        s == (0..n).collect::<Vec<_>>()
    }

    #[test]
    fn single_column_reads_top_to_bottom() {
        let boxes = [
            [50.0, 300.0, 500.0, 400.0],
            [50.0, 100.0, 500.0, 200.0],
            [60.0, 210.0, 480.0, 290.0],
        ];
        assert_eq!(reading_order(&boxes), vec![1, 2, 0]);
    }

    #[test]
    fn two_columns_are_read_one_after_the_other_not_by_raw_y() {
        // Left column paragraphs at y 100, 300, 500; right column at 110, 310.
        let boxes = [
            [330.0, 110.0, 560.0, 280.0],
            [40.0, 100.0, 290.0, 280.0],
            [330.0, 310.0, 560.0, 480.0],
            [40.0, 300.0, 290.0, 480.0],
            [40.0, 500.0, 290.0, 600.0],
        ];
        assert_eq!(reading_order(&boxes), vec![1, 3, 4, 0, 2]);
    }

    #[test]
    fn a_wide_region_separates_bands_of_columns() {
        let boxes = [
            [40.0, 10.0, 560.0, 50.0],    // 0 title
            [40.0, 60.0, 290.0, 200.0],   // 1 left, band 1
            [330.0, 60.0, 560.0, 200.0],  // 2 right, band 1
            [40.0, 220.0, 560.0, 400.0],  // 3 wide table
            [330.0, 420.0, 560.0, 600.0], // 4 right, band 2
            [40.0, 420.0, 290.0, 600.0],  // 5 left, band 2
        ];
        let order = reading_order(&boxes);
        assert_eq!(order, vec![0, 1, 2, 3, 5, 4]);
        assert!(is_permutation(&order, boxes.len()));
    }

    #[test]
    fn ragged_edges_do_not_merge_columns_and_empty_is_empty() {
        let boxes = [
            [60.0, 100.0, 300.0, 200.0],
            [290.0, 90.0, 540.0, 200.0],
            [40.0, 210.0, 290.0, 300.0],
        ];
        assert_eq!(reading_order(&boxes), vec![0, 2, 1]);
        assert!(reading_order(&[]).is_empty());
    }

    #[test]
    fn inversions_count_backward_steps() {
        assert_eq!(adjacent_inversions(&[0, 1, 2, 3]), 0);
        assert_eq!(adjacent_inversions(&[3, 2, 1, 0]), 3);
        assert_eq!(adjacent_inversions(&[]), 0);
    }
}
