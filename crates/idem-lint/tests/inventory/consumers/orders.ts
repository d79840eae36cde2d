import { Name, idem } from "@example/idem-client";

const orders = new Name("consumer", "orders_v1");

// A consumer that hands each event to idem's runner: idem's inbox is its marker.
export async function handleOrderEvent(event: OrderEvent) {
  await idem.runner(orders).run(event, async (tx) => {
    await tx.query("UPDATE orders SET status = $1 WHERE id = $2", [event.status, event.orderId]);
  });
}
