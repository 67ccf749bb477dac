//! Just enough protobuf to edit an ONNX model file without the `onnx` package.
//!
//! Two assets need a small edit of a serialized `ModelProto` before ONNX
//! Runtime loads them: the layout model's batch dimension is freed
//! (`layout::batch`), and open_nsfw gets its pooled feature as a second
//! output (`rayorch-video`). Both walk the message tree with [`parse`] and
//! rewrite it with [`edit_fields`].
//!
//! Invariants:
//! - Fields are re-framed, never re-encoded: a kept field's payload bytes are
//!   copied exactly (a varint keeps its original bytes), so everything an edit
//!   does not name is byte-identical in the output.
//! - Malformed input (a truncated varint or field, an overlong length, a
//!   group wire type) is an `Err` describing it; nothing here panics or reads
//!   past the buffer.

/// A protobuf field: number, wire type and payload (a varint's value is
/// kept as its raw bytes, so copying is exact).
pub struct Field<'a> {
    /// The field number.
    pub num: u64,
    /// The wire type: 0 varint, 1 fixed 64, 2 length-delimited, 5 fixed 32.
    pub wire: u8,
    /// The payload: a varint's bytes, a fixed field's bytes, or the content
    /// of a length-delimited field (without its length).
    pub data: &'a [u8],
}

impl Field<'_> {
    /// The payload read as UTF-8 (lossily), for names.
    pub fn string(&self) -> String {
        String::from_utf8_lossy(self.data).into_owned()
    }
}

/// Reads the varint at `b[*i..]` and moves `i` past it.
pub fn varint(b: &[u8], i: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i).ok_or("truncated varint")?;
        *i += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err("varint longer than 10 bytes".into())
}

/// The fields of one message, in order.
pub fn parse(b: &[u8]) -> Result<Vec<Field<'_>>, String> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let key = varint(b, &mut i)?;
        let (num, wire) = (key >> 3, (key & 7) as u8);
        let start = i;
        let data = match wire {
            0 => {
                varint(b, &mut i)?;
                &b[start..i]
            }
            1 | 5 => {
                i += if wire == 1 { 8 } else { 4 };
                b.get(start..i).ok_or("truncated fixed field")?
            }
            2 => {
                let len = usize::try_from(varint(b, &mut i)?).map_err(|_| "length overflow")?;
                let s = i;
                i = s.checked_add(len).ok_or("length overflow")?;
                b.get(s..i).ok_or("truncated field")?
            }
            w => return Err(format!("unsupported wire type {w} at byte {start}")),
        };
        out.push(Field { num, wire, data });
    }
    Ok(out)
}

/// Appends `v` as a varint.
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends a field; `data` is a varint's bytes, a fixed field's bytes, or a
/// length-delimited payload (its length is written here).
pub fn put(out: &mut Vec<u8>, num: u64, wire: u8, data: &[u8]) {
    put_varint(out, (num << 3) | u64::from(wire));
    if wire == 2 {
        put_varint(out, data.len() as u64);
    }
    out.extend_from_slice(data);
}

/// What to do with one field of a message.
pub enum Edit {
    /// Copy it as it is.
    Keep,
    /// Leave it out.
    Drop,
    /// Same number and wire type, this payload.
    Replace(Vec<u8>),
}

/// `msg` with `edit` applied to each of its fields, in order.
pub fn edit_fields(
    msg: &[u8],
    mut edit: impl FnMut(&Field<'_>) -> Result<Edit, String>,
) -> Result<Vec<u8>, String> {
    let mut out = Vec::with_capacity(msg.len());
    for f in parse(msg)? {
        match edit(&f)? {
            Edit::Keep => put(&mut out, f.num, f.wire, f.data),
            Edit::Drop => {}
            Edit::Replace(d) => put(&mut out, f.num, f.wire, &d),
        }
    }
    Ok(out)
}

// Field numbers of onnx.proto.
/// `ModelProto.graph`.
pub const MODEL_GRAPH: u64 = 7;
/// `GraphProto.node`.
pub const GRAPH_NODE: u64 = 1;
/// `GraphProto.initializer`.
pub const GRAPH_INITIALIZER: u64 = 5;
/// `GraphProto.input`.
pub const GRAPH_INPUT: u64 = 11;
/// `GraphProto.output`.
pub const GRAPH_OUTPUT: u64 = 12;
/// `GraphProto.value_info`.
pub const GRAPH_VALUE_INFO: u64 = 13;
/// `NodeProto.input`.
pub const NODE_INPUT: u64 = 1;
/// `NodeProto.output`.
pub const NODE_OUTPUT: u64 = 2;
/// `NodeProto.op_type`.
pub const NODE_OP: u64 = 4;
/// `NodeProto.attribute`.
pub const NODE_ATTR: u64 = 5;
/// `AttributeProto.name`.
pub const ATTR_NAME: u64 = 1;
/// `AttributeProto.i`.
pub const ATTR_INT: u64 = 3;
/// `AttributeProto.t`.
pub const ATTR_TENSOR: u64 = 5;
/// `TensorProto.data_type`.
pub const TENSOR_DATA_TYPE: u64 = 2;
/// `TensorProto.int64_data`.
pub const TENSOR_INT64_DATA: u64 = 7;
/// `TensorProto.name`.
pub const TENSOR_NAME: u64 = 8;
/// `TensorProto.raw_data`.
pub const TENSOR_RAW: u64 = 9;
/// `ValueInfoProto.name`.
pub const VALUE_NAME: u64 = 1;
/// `ValueInfoProto.type`.
pub const VALUE_TYPE: u64 = 2;
/// `TypeProto.tensor_type`.
pub const TYPE_TENSOR: u64 = 1;
/// `TypeProto.Tensor.elem_type`.
pub const TENSOR_TYPE_ELEM: u64 = 1;
/// `TypeProto.Tensor.shape`.
pub const TENSOR_TYPE_SHAPE: u64 = 2;
/// `TensorShapeProto.dim`.
pub const SHAPE_DIM: u64 = 1;
/// `Dimension.dim_value`.
pub const DIM_VALUE: u64 = 1;
/// `Dimension.dim_param`.
pub const DIM_PARAM: u64 = 2;
/// `TensorProto.DataType.FLOAT`.
pub const FLOAT: u64 = 1;
/// `TensorProto.DataType.INT64`.
pub const INT64: u64 = 7;

/// `ValueInfoProto { name, type: tensor(float)[N, dim] }`.
fn float_rows(name: &str, dim: u64) -> Vec<u8> {
    let mut n = Vec::new();
    put(&mut n, DIM_PARAM, 2, b"N");
    let mut d = Vec::new();
    put_varint(&mut d, dim);
    let mut d_dim = Vec::new();
    put(&mut d_dim, DIM_VALUE, 0, &d);
    let mut shape = Vec::new();
    put(&mut shape, SHAPE_DIM, 2, &n);
    put(&mut shape, SHAPE_DIM, 2, &d_dim);
    let mut tensor = Vec::new();
    put(&mut tensor, TENSOR_TYPE_ELEM, 0, &[FLOAT as u8]);
    put(&mut tensor, TENSOR_TYPE_SHAPE, 2, &shape);
    let mut ty = Vec::new();
    put(&mut ty, TYPE_TENSOR, 2, &tensor);
    let mut vi = Vec::new();
    put(&mut vi, VALUE_NAME, 2, name.as_bytes());
    put(&mut vi, VALUE_TYPE, 2, &ty);
    vi
}

/// A serialized `ModelProto` with one more graph output, `name` as
/// f32[N, dim], appended after the graph's existing fields. The tensor must
/// exist in the graph (ONNX Runtime refuses the model otherwise).
pub fn add_graph_output(model: &[u8], name: &str, dim: u64) -> Result<Vec<u8>, String> {
    let mut graphs = 0;
    let out = edit_fields(model, |f| {
        if f.num != MODEL_GRAPH {
            return Ok(Edit::Keep);
        }
        graphs += 1;
        let mut graph = f.data.to_vec();
        put(&mut graph, GRAPH_OUTPUT, 2, &float_rows(name, dim));
        Ok(Edit::Replace(graph))
    })?;
    match graphs {
        1 => Ok(out),
        0 => Err("no graph in the model file (not an ONNX ModelProto)".into()),
        n => Err(format!("{n} graphs in the model file (expected one)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip() {
        for v in [0u64, 1, 127, 128, 300, 1 << 40, u64::MAX] {
            let mut b = Vec::new();
            put_varint(&mut b, v);
            let mut pos = 0;
            assert_eq!(varint(&b, &mut pos).unwrap(), v);
            assert_eq!(pos, b.len());
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        for bad in [
            &b"\x0a\x05ab"[..],                                   // a length past the end
            &b"\x08"[..],                                         // a key without its varint
            &b"\x09\x01\x02"[..],                                 // a truncated fixed64
            &b"\x0b"[..],                                         // a group (wire type 3)
            &[0xff; 11][..],                                      // a varint of 11 bytes
            &b"\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"[..], // an absurd length
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn kept_fields_are_copied_byte_for_byte() {
        // A non-minimal varint (1 written in two bytes) survives a copy.
        let msg = b"\x08\x81\x00\x12\x02hi\x1d\x01\x02\x03\x04";
        assert_eq!(edit_fields(msg, |_| Ok(Edit::Keep)).unwrap(), msg);
        let dropped = edit_fields(msg, |f| Ok(if f.num == 2 { Edit::Drop } else { Edit::Keep }));
        assert_eq!(dropped.unwrap(), b"\x08\x81\x00\x1d\x01\x02\x03\x04");
    }

    #[test]
    fn the_output_lands_at_the_end_of_the_graph() {
        // ModelProto { ir_version: 4, graph { name: "g" }, producer: "p" }
        let mut graph = Vec::new();
        put(&mut graph, 2, 2, b"g");
        let mut model = vec![8, 4];
        put(&mut model, MODEL_GRAPH, 2, &graph);
        put(&mut model, 2, 2, b"p");
        let out = add_graph_output(&model, "Reshape:0", 1024).unwrap();
        let top = parse(&out).unwrap();
        assert_eq!((top[0].data, top[2].data), (&[4u8][..], &b"p"[..]));
        let g = parse(top[1].data).unwrap();
        assert_eq!((g[0].data, g[1].num), (&b"g"[..], GRAPH_OUTPUT));
        let vi = parse(g[1].data).unwrap();
        assert_eq!(vi[0].string(), "Reshape:0");
        let tensor = &parse(parse(vi[1].data).unwrap()[0].data).unwrap();
        assert_eq!(tensor[0].data, [FLOAT as u8]);
        let dims: Vec<Vec<u8>> = parse(tensor[1].data)
            .unwrap()
            .iter()
            .map(|d| parse(d.data).unwrap()[0].data.to_vec())
            .collect();
        let mut d1024 = Vec::new();
        put_varint(&mut d1024, 1024);
        assert_eq!(dims, [b"N".to_vec(), d1024]);
        assert!(add_graph_output(b"\x08\x04", "x", 1).is_err(), "no graph");
        let mut two = model.clone();
        put(&mut two, MODEL_GRAPH, 2, &graph);
        assert!(add_graph_output(&two, "x", 1).is_err(), "two graphs");
    }
}
