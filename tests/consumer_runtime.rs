//! The consumer through the REAL runtime: driver, run database, consumer tools and consequence
//! policy. The nineteen argument cases, the authorisation matrix, the injected conversation.

mod consumer_support;

use consumer_support::nineteen;
use consumer_support::rt::{outcome, world};
use countersign::consumer::dispatch::DispatcherOptions;

#[tokio::test]
async fn the_nineteen_argument_cases_through_the_runtime() {
    let mut w = world();
    // Where each case is answered: the runtime's admission schema (shape), the policy
    // (stages 2 to 8), or the tool (execution).
    let layers = [
        "tool", "runtime", "runtime", "runtime", "runtime", "policy", "policy", "runtime",
        "runtime", "policy", "policy", "policy", "policy", "runtime", "tool", "tool", "policy",
        "policy", "runtime",
    ];
    for (i, case) in nineteen().into_iter().enumerate() {
        w.fresh_backend(DispatcherOptions::default());
        let id = format!("case-{i:02}");
        let run = w
            .run_calls(&id, "cu_ana", &[(case.tool, case.args.clone())])
            .await;
        let steps = w.steps(&id);
        let (code, layer) = outcome(&steps[0]);
        assert_eq!(
            code, case.code,
            "{}: {:?}",
            case.label, steps[0].observation
        );
        assert_eq!(layer, layers[i], "{}", case.label);
        assert_eq!(w.effects(&id), case.effects, "{}", case.label);
        assert_eq!(run.status.as_str(), "COMPLETED", "{}", case.label);
        // A policy refusal carries the same property-path detail as the dispatcher.
        if layer == "policy" && !case.detail.is_empty() {
            let obs = steps[0].observation.as_ref().unwrap();
            let content: serde_json::Value = serde_json::from_slice(&obs.content).unwrap();
            let reason = content["reason"].as_str().unwrap();
            assert_eq!(
                reason,
                format!("{}: {}", case.code, case.detail.join("; ")),
                "{}",
                case.label
            );
        }
    }
}
