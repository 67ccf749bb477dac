//! Model stages for rayorch (PDF rendering, OCR, embeddings).
//!
//! Skeleton only: the stages arrive with the document-OCR issue.
