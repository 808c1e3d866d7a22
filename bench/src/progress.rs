//! Progress bars (indicatif) for the phases of a run. They draw on standard error only when it
//! is a terminal, so logs of CI runs stay clean.

use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A bar for a phase of `total` units, labelled `name`.
pub fn bar(name: &str, total: u64, unit: &str) -> ProgressBar {
    let bar = ProgressBar::new(total.max(1));
    let template = format!(
        "{{spinner}} {{msg:<44}} [{{elapsed_precise}}] {{wide_bar}} {{pos}}/{{len}} {unit}"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(name.to_owned());
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// A bar that counts seconds of a timed phase.
pub fn timed(name: &str, seconds: f64) -> ProgressBar {
    bar(name, (seconds * 10.0).ceil() as u64, "×0.1 s")
}
