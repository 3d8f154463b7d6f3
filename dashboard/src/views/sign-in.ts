import { signIn, type Me } from "../api.js";
import { h } from "../dom.js";

/** A user token for a session cookie; the token itself is never stored by the page. */
export function signInView(root: HTMLElement, done: (who: Me) => void): () => void {
  const input = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const error = h("p", { class: "error", role: "alert" });
  const form = h(
    "form",
    {
      class: "sign-in",
      onsubmit: (e: Event) => {
        e.preventDefault();
        error.textContent = "";
        signIn(input.value).then(
          (who) => {
            input.value = "";
            done(who);
          },
          (err: Error) => (error.textContent = err.message),
        );
      },
    },
    h("h1", {}, "Sign in"),
    h("p", {}, "Use a user token (", h("code", {}, "farm token create --kind user --name NAME"), ")."),
    h("label", { for: "token" }, "User token"),
    input,
    h("button", { type: "submit" }, "Sign in"),
    error,
  );
  root.append(form);
  input.focus();
  return () => undefined;
}
