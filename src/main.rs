fn main() {
    std::process::exit(countersign::commands::main_entry());
}
