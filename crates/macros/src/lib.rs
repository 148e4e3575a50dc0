//! Procedural macros for provrun: the `#[tool]` attribute that turns a Rust fn into a tool.
//!
//! Use the macro through `provrun_tools::tool` (or `provrun::tool` from the facade); this
//! crate only generates code and has no runtime of its own. What the attribute reads and
//! generates is documented on [`macro@tool`].
//!
//! The attribute's options are read in `options`, doc comments in `docs`, and the tool's
//! code is written in `generate`.

use proc_macro::TokenStream;
use proc_macro2::TokenStream as TokenStream2;
use quote::quote;
use syn::{ItemFn, parse_macro_input};

mod docs;
mod generate;
mod options;

use generate::generate;
use options::Options;

/// Turn a free function into a provrun tool and register it at link time.
///
/// ```ignore
/// use provrun_tools::{tool, RunContext};
///
/// /// Count the words in a text.
/// ///
/// /// Everything after the first paragraph stays out of the tool's description.
/// #[tool(category = "read", summary = "Count words")]
/// fn word_count(
///     /// The text to count.
///     text: String,
/// ) -> usize {
///     text.split_whitespace().count()
/// }
/// ```
///
/// What it reads:
/// - the tool's name: the fn's name, or `name = "…"`;
/// - its description: the first paragraph of the fn's doc comment (or `description = "…"`);
///   a tool with neither is a compile error, because the model needs one;
/// - each parameter's doc comment: that property's `description` in the schema;
/// - each parameter's type: its JSON Schema (schemars) and its parsing (serde), so every
///   parameter type must implement `serde::Deserialize` and `schemars::JsonSchema`, and be
///   owned (`String`, not `&str`). `Option<T>` parameters are optional;
/// - `#[schemars(…)]` and `#[serde(…)]` on a parameter: applied to that argument, e.g.
///   `#[schemars(example = "/input/notes.txt")]` adds an `examples` entry to its schema;
/// - a leading `ctx: &RunContext` parameter: the run's context, never part of the schema;
/// - options `destructive`, `category = "read" | "write" | "execute" | "network" | "search"
///   | "other"`, `confirm = "…"`, `summary = "…"`, `mode = "in_process" |
///   "client_round_trip" | "remote_mcp"`.
///
/// What it generates, beside the unchanged fn: a unit struct named after the fn in
/// PascalCase with a `Tool` suffix (`word_count` → `WordCountTool`) whose `tool()` returns
/// the [`Tool`](../provrun_tools/struct.Tool.html), and an `inventory` registration so that
/// `ToolRegistry::linked()` finds it.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, quote!(::provrun_tools))
}

/// The same attribute as [`macro@tool`], for code that depends on the `provrun` facade
/// crate instead of `provrun-tools`; the facade re-exports it as `provrun::tool`.
#[proc_macro_attribute]
pub fn facade_tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    expand(attr, item, quote!(::provrun::tools))
}

fn expand(attr: TokenStream, item: TokenStream, default_krate: TokenStream2) -> TokenStream {
    let mut options = Options::default();
    let parser = syn::meta::parser(|meta| options.parse(meta));
    parse_macro_input!(attr with parser);
    let func = parse_macro_input!(item as ItemFn);
    match generate(options, func, default_krate) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}
