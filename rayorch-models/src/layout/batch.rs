//! Freeing the batch dimension of the layout model.
//!
//! `layout_cdla.onnx` is exported with a fixed batch of one: its input is
//! `[1, 3, 800, 608]`, its outputs `[1, cells, k]`, and the eight `Reshape`s
//! that flatten the heads take constant shapes `[1, k, -1]`. Everything else
//! (convolutions, pooling, resizes by scale, splits on the channel axis) works
//! on any batch. [`free_batch`] rewrites exactly those places: the first
//! dimension of every graph input and output becomes the symbolic `N`, and a
//! reshape's leading `1` becomes `0` ("copy the input's dimension"; the
//! models' reshapes do not set `allowzero`). Intermediate shape annotations
//! (`value_info`) are dropped, ONNX Runtime infers them again.
//!
//! Invariants:
//! - Only the fields named above change; every other byte of the model is
//!   copied (protobuf fields are re-framed, not re-encoded: `onnx::proto`).
//! - A graph this does not understand (a constant reshape whose leading
//!   dimension is neither 1, 0 nor -1, `allowzero` set, a malformed
//!   message) is an error, never a silently wrong model: the caller then
//!   runs one page per call.

use std::collections::HashSet;

use crate::onnx::proto::{
    ATTR_INT, ATTR_NAME, ATTR_TENSOR, DIM_PARAM, Edit, GRAPH_INITIALIZER, GRAPH_INPUT, GRAPH_NODE,
    GRAPH_OUTPUT, GRAPH_VALUE_INFO, INT64, MODEL_GRAPH, NODE_ATTR, NODE_INPUT, NODE_OP, NODE_OUTPUT,
    SHAPE_DIM, TENSOR_DATA_TYPE, TENSOR_INT64_DATA, TENSOR_NAME, TENSOR_RAW, TENSOR_TYPE_SHAPE, TYPE_TENSOR,
    VALUE_TYPE, edit_fields, parse, put, varint,
};

/// A value's type with its first dimension made the symbolic `N`.
fn free_first_dim(value_info: &[u8]) -> Result<Vec<u8>, String> {
    let mut dim = Vec::new();
    put(&mut dim, DIM_PARAM, 2, b"N");
    let shape = |s: &[u8]| {
        let mut first = true;
        edit_fields(s, |f| {
            Ok(if f.num == SHAPE_DIM && std::mem::take(&mut first) {
                Edit::Replace(dim.clone())
            } else {
                Edit::Keep
            })
        })
    };
    let tensor = |t: &[u8]| {
        edit_fields(t, |f| {
            Ok(if f.num == TENSOR_TYPE_SHAPE {
                Edit::Replace(shape(f.data)?)
            } else {
                Edit::Keep
            })
        })
    };
    let ty = |t: &[u8]| {
        edit_fields(t, |f| {
            Ok(if f.num == TYPE_TENSOR {
                Edit::Replace(tensor(f.data)?)
            } else {
                Edit::Keep
            })
        })
    };
    edit_fields(value_info, |f| {
        Ok(if f.num == VALUE_TYPE {
            Edit::Replace(ty(f.data)?)
        } else {
            Edit::Keep
        })
    })
}

/// An int64 shape tensor with a leading `1` made `0` (same length: the
/// little-endian raw bytes or the first packed varint change in place).
fn batch_free_shape(tensor: &[u8]) -> Result<Vec<u8>, String> {
    let fields = parse(tensor)?;
    let int64 = fields
        .iter()
        .any(|f| f.num == TENSOR_DATA_TYPE && f.data.first() == Some(&(INT64 as u8)));
    if !int64 {
        return Err("a reshape shape that is not int64".into());
    }
    let lead = |d: &[u8], raw: bool| -> Result<i64, String> {
        if raw {
            let b: [u8; 8] = d
                .get(..8)
                .and_then(|s| s.try_into().ok())
                .ok_or("empty reshape shape")?;
            Ok(i64::from_le_bytes(b))
        } else {
            let mut i = 0;
            Ok(varint(d, &mut i)? as i64)
        }
    };
    edit_fields(tensor, |f| {
        let raw = f.num == TENSOR_RAW;
        if !(raw || f.num == TENSOR_INT64_DATA) {
            return Ok(Edit::Keep);
        }
        match lead(f.data, raw)? {
            1 => {
                let mut d = f.data.to_vec();
                d[0] = 0;
                Ok(Edit::Replace(d))
            }
            0 | -1 => Ok(Edit::Keep),
            v => Err(format!("a reshape to a fixed leading dimension {v}")),
        }
    })
}

/// The model `onnx` (serialized `ModelProto`) with a free batch dimension;
/// see the module docs for what changes and when this refuses.
pub fn free_batch(onnx: &[u8]) -> Result<Vec<u8>, String> {
    edit_fields(onnx, |f| {
        Ok(if f.num == MODEL_GRAPH {
            Edit::Replace(free_graph(f.data)?)
        } else {
            Edit::Keep
        })
    })
}

fn free_graph(graph: &[u8]) -> Result<Vec<u8>, String> {
    // Names of the tensors that feed a Reshape's shape input.
    let mut shapes: HashSet<String> = HashSet::new();
    for f in parse(graph)?.iter().filter(|f| f.num == GRAPH_NODE) {
        let node = parse(f.data)?;
        if !node.iter().any(|n| n.num == NODE_OP && n.data == b"Reshape") {
            continue;
        }
        for a in node.iter().filter(|n| n.num == NODE_ATTR) {
            let attr = parse(a.data)?;
            let allowzero = attr.iter().any(|x| x.num == ATTR_NAME && x.data == b"allowzero");
            if allowzero && attr.iter().any(|x| x.num == ATTR_INT && x.data != [0]) {
                return Err("a Reshape with allowzero set".into());
            }
        }
        if let Some(s) = node.iter().filter(|n| n.num == NODE_INPUT).nth(1) {
            shapes.insert(s.string());
        }
    }
    edit_fields(graph, |f| match f.num {
        GRAPH_NODE => {
            let node = parse(f.data)?;
            let is_shape = node.iter().any(|n| n.num == NODE_OP && n.data == b"Constant")
                && node
                    .iter()
                    .any(|n| n.num == NODE_OUTPUT && shapes.contains(&n.string()));
            if !is_shape {
                return Ok(Edit::Keep);
            }
            let attr = |a: &[u8]| {
                edit_fields(a, |x| {
                    Ok(if x.num == ATTR_TENSOR {
                        Edit::Replace(batch_free_shape(x.data)?)
                    } else {
                        Edit::Keep
                    })
                })
            };
            Ok(Edit::Replace(edit_fields(f.data, |n| {
                Ok(if n.num == NODE_ATTR {
                    Edit::Replace(attr(n.data)?)
                } else {
                    Edit::Keep
                })
            })?))
        }
        GRAPH_INITIALIZER => {
            let named = parse(f.data)?
                .iter()
                .any(|t| t.num == TENSOR_NAME && shapes.contains(&t.string()));
            Ok(if named {
                Edit::Replace(batch_free_shape(f.data)?)
            } else {
                Edit::Keep
            })
        }
        GRAPH_INPUT | GRAPH_OUTPUT => Ok(Edit::Replace(free_first_dim(f.data)?)),
        GRAPH_VALUE_INFO => Ok(Edit::Drop),
        _ => Ok(Edit::Keep),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(fields: &[(u64, u8, Vec<u8>)]) -> Vec<u8> {
        let mut out = Vec::new();
        for (n, w, d) in fields {
            put(&mut out, *n, *w, d);
        }
        out
    }

    fn dims(value_info: &[u8]) -> Vec<Vec<u8>> {
        let ty = parse(value_info)
            .unwrap()
            .into_iter()
            .find(|f| f.num == VALUE_TYPE)
            .unwrap();
        let tt = parse(ty.data)
            .unwrap()
            .into_iter()
            .find(|f| f.num == TYPE_TENSOR)
            .unwrap();
        let shape = parse(tt.data)
            .unwrap()
            .into_iter()
            .find(|f| f.num == TENSOR_TYPE_SHAPE)
            .unwrap();
        parse(shape.data)
            .unwrap()
            .into_iter()
            .map(|d| d.data.to_vec())
            .collect()
    }

    /// `name: [1, 3, 8, 8]` as a ValueInfoProto.
    fn value_info(name: &str) -> Vec<u8> {
        let dim = |v: u8| msg(&[(SHAPE_DIM, 2, msg(&[(1, 0, vec![v])]))]);
        let shape: Vec<u8> = [1, 3, 8, 8].iter().flat_map(|&v| dim(v)).collect();
        let tt = msg(&[(1, 0, vec![1]), (TENSOR_TYPE_SHAPE, 2, shape)]);
        msg(&[
            (1, 2, name.as_bytes().to_vec()),
            (VALUE_TYPE, 2, msg(&[(TYPE_TENSOR, 2, tt)])),
        ])
    }

    fn shape_const(out: &str, lead: i64) -> Vec<u8> {
        let mut raw = Vec::new();
        for v in [lead, 10, -1] {
            raw.extend_from_slice(&v.to_le_bytes());
        }
        let t = msg(&[
            (1, 0, vec![3]),
            (TENSOR_DATA_TYPE, 0, vec![INT64 as u8]),
            (TENSOR_RAW, 2, raw),
        ]);
        let attr = msg(&[(ATTR_NAME, 2, b"value".to_vec()), (ATTR_TENSOR, 2, t)]);
        msg(&[
            (NODE_OUTPUT, 2, out.as_bytes().to_vec()),
            (NODE_OP, 2, b"Constant".to_vec()),
            (NODE_ATTR, 2, attr),
        ])
    }

    fn model(lead: i64) -> Vec<u8> {
        let reshape = msg(&[
            (NODE_INPUT, 2, b"x".to_vec()),
            (NODE_INPUT, 2, b"s".to_vec()),
            (NODE_OUTPUT, 2, b"y".to_vec()),
            (NODE_OP, 2, b"Reshape".to_vec()),
        ]);
        let graph = msg(&[
            (GRAPH_NODE, 2, shape_const("s", lead)),
            (GRAPH_NODE, 2, reshape),
            (GRAPH_INPUT, 2, value_info("x")),
            (GRAPH_OUTPUT, 2, value_info("y")),
            (GRAPH_VALUE_INFO, 2, value_info("z")),
        ]);
        msg(&[
            (1, 0, vec![8]),
            (MODEL_GRAPH, 2, graph),
            (14, 2, b"meta".to_vec()),
        ])
    }

    #[test]
    fn batch_one_becomes_symbolic_and_reshapes_copy_it() {
        let out = free_batch(&model(1)).unwrap();
        let top = parse(&out).unwrap();
        assert_eq!((top[0].num, top[2].data), (1, &b"meta"[..]));
        let graph = parse(top[1].data).unwrap();
        assert_eq!(graph.len(), 4, "value_info dropped");
        for io in &graph[2..] {
            let d = dims(io.data);
            assert_eq!(d[0], msg(&[(DIM_PARAM, 2, b"N".to_vec())]));
            assert_eq!(d[1], msg(&[(1, 0, vec![3])]));
        }
        let node = parse(graph[0].data).unwrap();
        let attr = parse(node[2].data).unwrap();
        let t = parse(attr[1].data).unwrap();
        let raw = t.iter().find(|f| f.num == TENSOR_RAW).unwrap().data;
        assert_eq!(&raw[..8], &0i64.to_le_bytes());
        assert_eq!(&raw[8..16], &10i64.to_le_bytes());
        // Everything else is byte-identical.
        assert_eq!(
            graph[1].data,
            parse(parse(&model(1)).unwrap()[1].data).unwrap()[1].data
        );
    }

    #[test]
    fn a_fixed_leading_dimension_or_garbage_is_refused() {
        assert!(
            free_batch(&model(4))
                .unwrap_err()
                .contains("fixed leading dimension 4")
        );
        assert!(free_batch(&model(-1)).is_ok());
        assert!(free_batch(&[0x3a, 0x05, 0x01]).is_err(), "truncated graph");
        assert!(free_batch(&[0xff]).is_err());
    }
}
