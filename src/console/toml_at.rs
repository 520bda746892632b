//! Where in a TOML file a syntax error is: the configuration and theme files name it.

/// `file:line:column` of a TOML syntax error (1-based; the column counts characters), or the
/// file alone when the parser gave no position.
pub(crate) fn at(file: &str, src: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else {
        return file.to_string();
    };
    let start = span.start.min(src.len());
    let before = src.get(..start).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!("{file}:{line}:{col}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_syntax_error_is_placed_by_line_and_column() {
        let src = "theme = \"light\"\n[keys]\napprove = = \"z\"\n";
        let e = src.parse::<toml::Table>().unwrap_err();
        assert_eq!(super::at("c.toml", src, &e), "c.toml:3:11");
    }
}
