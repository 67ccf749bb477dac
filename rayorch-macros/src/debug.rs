//! `RAYORCH_MACROS_DEBUG`: print an expansion to stderr.
//!
//! `RAYORCH_MACROS_DEBUG=1` (or `*`) prints every expansion; any other value
//! prints only the expansions for the type of that name
//! (`RAYORCH_MACROS_DEBUG=DocPipeline`). The text goes through `rustfmt` when
//! one is on the PATH, and is printed raw otherwise.

use std::io::Write;
use std::process::{Command, Stdio};

use proc_macro2::TokenStream;

const VAR: &str = "RAYORCH_MACROS_DEBUG";

pub(crate) fn print(macro_name: &str, item_name: &str, tokens: &TokenStream) {
    let Ok(filter) = std::env::var(VAR) else {
        return;
    };
    let wanted = match filter.as_str() {
        "" | "0" => false,
        "1" | "*" => true,
        name => name == item_name,
    };
    if !wanted {
        return;
    }
    let raw = tokens.to_string();
    let text = rustfmt(&raw).unwrap_or(raw);
    eprintln!("// {VAR}: #[{macro_name}] on `{item_name}`\n{text}");
}

fn rustfmt(code: &str) -> Option<String> {
    let mut child = Command::new("rustfmt")
        .args(["--edition", "2024", "--emit", "stdout"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    child.stdin.take()?.write_all(code.as_bytes()).ok()?;
    let out = child.wait_with_output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
