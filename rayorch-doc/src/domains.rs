//! The Domains both document jobs share: a PDF and its pages (each job
//! adds its own below: lines, or regions and their lines).

use rayorch::prelude::*;

/// A PDF document: the root Domain.
#[derive(Domain)]
pub struct Pdf;
/// A page of a document.
#[derive(Domain)]
#[domain(parent = Pdf)]
pub struct Page;
