//! Two source Ports and two outputs: `Pipeline::Input` is the tuple of the
//! sources' values, `Pipeline::Outputs` the tuple of output handles.

use rayorch::prelude::*;
use rayorch::{Item, Output};

#[derive(Domain)]
struct Order;

struct Totals {
    total: FnCall<(u32, u32), u32>,
    label: FnCall<(String, u32), String>,
}

#[pipeline]
impl Totals {
    fn forward(
        &self,
        names: Port<Order, String>,
        qty: Port<Order, u32>,
    ) -> (Port<Order, String>, Port<Order, u32>) {
        let total = self.total(qty, qty);
        (self.label(names, total), total)
    }
}

fn main() {
    let p = Totals {
        total: Call::map("total", |(a, b): (u32, u32)| a + b),
        label: Call::map("label", |(n, t): (String, u32)| format!("{n}={t}")),
    };
    let ((labels, totals), roots): ((Output<String>, Output<u32>), _) =
        ui_tests::run(&p, vec![("apples".to_string(), 3), ("pears".to_string(), 5)]);
    let got: Vec<_> = roots.iter().map(|r| (r.get(labels), r.get(totals))).collect();
    assert_eq!(
        got,
        vec![
            (Item::Present("apples=6".to_string()), Item::Present(6)),
            (Item::Present("pears=10".to_string()), Item::Present(10)),
        ]
    );
}
