//! What the kit's run tests share: documents of pages, and the "OCR" of one
//! page.

use rayorch::spi::StageKind;
use rayorch::{Call, Cause, Outcome, Plan};

rayorch::domain!(pub(crate) Doc);
rayorch::domain!(pub(crate) Page: Doc);

/// Page `p` of document `doc`: its "text" is `doc * 1000 + p`, except page 3
/// of document 5, which is unreadable (a record failure).
pub(crate) fn read_page(doc: u64, p: u32) -> Outcome<u64> {
    match (doc, p) {
        (5, 3) => Outcome::RecordFailure(Cause::new("page 3 of document 5 is unreadable")),
        _ => Outcome::Ok(u64::from(p) + doc * 1000),
    }
}

/// `render` turns a document `(key, pages)` into its pages, `ocr` (batches
/// of 4 on 2 replicas) reads them, a reduce gathers each document's pages.
pub(crate) fn docs_plan(
    render: Call<impl StageKind<In = (u64, u32), Out = Vec<(u64, u32)>>>,
    ocr: Call<impl StageKind<In = (u64, u32), Out = u64>>,
) -> Plan {
    let ocr = ocr.batch_size(4).replicas(2);
    let (plan, _) = Plan::build(|b| {
        let docs = b.source::<Doc, (u64, u32)>();
        let pages = rayorch::expand::<Page, _, _>(render.apply(docs));
        b.output(rayorch::reduce(ocr.apply(pages)))
    })
    .unwrap();
    plan
}
