//! The one error type of the view crate.

/// What went wrong making a page.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ViewError {
    /// The page's template did not render (a defect of this crate, not of the bundle:
    /// every bundle, readable or not, gives a page).
    #[error("cannot render the page: {0}")]
    Template(String),
}
