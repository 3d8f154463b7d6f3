import type { AppModel } from "../screen-spec.js";

export const DEMO_PACKAGE = "com.example.farmdemo";

/**
 * The app under test in farm's own tests: a form with a text field, a
 * checkbox, a disabled button, and a button that navigates to a second
 * screen which shows what was typed.
 */
export const demoApp: AppModel = {
  packageName: DEMO_PACKAGE,
  label: "Farm Demo",
  mainActivity: ".MainActivity",
  activities: { ".WelcomeActivity": "welcome" },
  screen(name, { values }) {
    const color = "#00796b";
    if (name === "main") {
      return {
        title: "Farm Demo",
        color,
        items: [
          { kind: "text", id: "headline", text: "Sign in" },
          { kind: "edit", id: "name", stateKey: "name", hint: "Your name", onTap: { type: "focus", key: "name" } },
          { kind: "checkbox", id: "remember", text: "Remember me", stateKey: "remember" },
          { kind: "button", id: "next", text: "Next", onTap: { type: "navigate", screen: "welcome" } },
          { kind: "button", id: "delete", text: "Delete account", enabled: false },
        ],
      };
    }
    if (name === "welcome") {
      const who = String(values.get("name") || "guest");
      return {
        title: "Welcome",
        color: "#ef6c00",
        items: [
          { kind: "text", id: "greeting", text: `Welcome, ${who}!` },
          { kind: "text", id: "remembered", text: values.get("remember") === true ? "You will stay signed in." : "You will be signed out." },
          { kind: "button", id: "back", text: "Back", onTap: { type: "back" } },
        ],
      };
    }
    return undefined;
  },
};
