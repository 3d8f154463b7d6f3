import { h } from "./dom.js";
import type { LiveState, PagedTopic } from "./live-state.js";

/**
 * A "More" button under a paged list: it reads the next (older) page, and
 * is there only while the coordinator has more. Call `update` from the
 * view's render.
 */
export function moreButton(state: LiveState, topic: PagedTopic, what: string): { el: HTMLElement; update: () => void } {
  const status = h("span", { class: "count", role: "status" });
  const button = h("button", { type: "button", "data-more": topic }, `More ${what}`);
  const el = h("div", { class: "pager" }, button, status);
  const update = () => {
    el.hidden = state.nextPage[topic] === "";
  };
  button.addEventListener("click", () => {
    button.disabled = true;
    status.textContent = "Loading…";
    void state.loadMore(topic).then(
      () => (status.textContent = ""),
      (err: unknown) => (status.textContent = `Could not load more: ${err instanceof Error ? err.message : String(err)}`),
    ).finally(() => {
      button.disabled = false;
      update();
    });
  });
  update();
  return { el, update };
}
