//! Doc comments read from `#[doc]` attributes: their lines, the first paragraph (a
//! tool's description) and the whole text (a parameter's).

use syn::{Attribute, Expr, ExprLit, Lit};

/// Lines of the `#[doc]` attributes, each with the one space rustdoc puts after `///` removed.
pub(crate) fn doc_lines(attrs: &[Attribute]) -> Vec<String> {
    let mut lines = Vec::new();
    for attr in attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(ExprLit {
                lit: Lit::Str(s), ..
            }) = &nv.value
        {
            // `split`, not `lines`: an empty `///` line is a paragraph break and must stay.
            for line in s.value().split('\n') {
                lines.push(
                    line.strip_prefix(' ')
                        .unwrap_or(line)
                        .trim_end()
                        .to_string(),
                );
            }
        }
    }
    lines
}

/// The first paragraph of a doc comment, its lines joined by spaces.
pub(crate) fn first_paragraph(lines: &[String]) -> String {
    lines
        .iter()
        .map(|l| l.trim())
        .skip_while(|l| l.is_empty())
        .take_while(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whole doc text, paragraphs kept, for a parameter's description.
pub(crate) fn whole_doc(lines: &[String]) -> String {
    lines.join("\n").trim().to_string()
}
