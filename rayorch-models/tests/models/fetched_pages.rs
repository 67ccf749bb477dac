//! A document read from a URL by its fetch Call crosses to another process
//! as its URL alone: its page handles carry no document bytes, and the
//! receiving process reads the object itself with the reader it set
//! (`pdf::read_urls_with`), once for all the pages it decodes. This binary
//! is the only one that sets a reader (it is process-wide).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rayorch_models::pdf::{open_document, read_urls_with};
use rayorch_models::wire::Wire;
use rayorch_models::{PdfFile, PdfPage, PdfSource};
use rayorch_testdata::pdfgen::text_pdf;

const URL: &str = "s3://fetched-pages/reports/r.pdf";

#[test]
fn a_fetched_documents_pages_travel_as_its_url_and_are_read_once_where_decoded() {
    let pdf: Arc<[u8]> = text_pdf(
        &[
            vec!["First page".into()],
            vec!["Second page".into()],
            vec!["Third".into()],
        ],
        12.0,
    )
    .into();
    static READS: AtomicUsize = AtomicUsize::new(0);
    let served = pdf.clone();
    read_urls_with(move |url| {
        READS.fetch_add(1, Ordering::Relaxed);
        match url {
            URL => Ok(served.clone()),
            other => Err(format!("{other}: no such object")),
        }
    });

    // The owner's side: the fetch Call read the bytes, the document is open.
    let file = PdfFile::fetched(URL, URL, pdf.clone());
    let pages: Vec<PdfPage> = open_document(&file).unwrap().into_iter().collect();
    let wire: Vec<Vec<u8>> = pages.iter().map(Wire::to_wire).collect();
    for w in &wire {
        assert!(
            w.len() < URL.len() * 2 + 64 && w.len() < pdf.len(),
            "a page handle carries its document's URL, not its {} bytes: {} bytes",
            pdf.len(),
            w.len()
        );
    }
    assert!(matches!(
        PdfFile::from_wire(&file.to_wire()).unwrap().source,
        PdfSource::Url(u) if &*u == URL
    ));

    // The worker's side: every page decodes, from one read of the object.
    let back: Vec<PdfPage> = wire.iter().map(|b| PdfPage::from_wire(b).unwrap()).collect();
    assert_eq!(back.iter().map(PdfPage::index).collect::<Vec<_>>(), [0, 1, 2]);
    assert_eq!(READS.load(Ordering::Relaxed), 1, "read once for its three pages");
    // Sent on again, it is still its URL.
    assert_eq!(back[1].to_wire(), wire[1]);

    // Pages decoded after every handle is gone: read again at most once
    // more (the last few URL documents stay open without handles).
    drop(back);
    let again = PdfPage::from_wire(&wire[2]).unwrap();
    assert_eq!(again.index(), 2);
    assert_eq!(
        READS.load(Ordering::Relaxed),
        1,
        "kept open among the recent URL documents"
    );

    // An object the reader cannot read fails the decode, naming it.
    let missing = PdfFile::from_url("s3://fetched-pages/gone.pdf");
    let e = open_document(&missing).unwrap_err().to_string();
    assert!(e.contains("s3://fetched-pages/gone.pdf: no such object"), "{e}");
}
