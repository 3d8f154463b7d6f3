import type { TapAction } from "./ui-node.js";

/** One widget of a screen, laid out top to bottom. */
export interface ItemSpec {
  kind: "text" | "button" | "checkbox" | "switch" | "edit" | "row" | "icon";
  /** Resource id without package, e.g. `remember` → `PKG:id/remember`. */
  id?: string;
  text?: string;
  contentDesc?: string;
  enabled?: boolean;
  /** For checkbox/switch/edit: key of the app state value it shows. */
  stateKey?: string;
  hint?: string;
  onTap?: TapAction;
}

/** A screen of an app: a title bar and a column of widgets (or a grid of icons). */
export interface ScreenSpec {
  title?: string;
  /** Title bar and accent colour. */
  color: string;
  background?: string;
  items: ItemSpec[];
  layout?: "column" | "grid";
}

/** Values behind checkboxes, switches and text fields, by state key. */
export type AppValues = Map<string, string | boolean>;

/** What a screen may show besides its own values. */
export interface ScreenContext {
  values: AppValues;
  prop(key: string): string | undefined;
  /** Apps with a launcher entry (for the home screen). */
  launchable: ReadonlyArray<{ packageName: string; label: string }>;
}

/** An app the simulator can show: its screens by name. */
export interface AppModel {
  packageName: string;
  label: string;
  /** Activity class of the launcher entry, e.g. `.MainActivity`. */
  mainActivity: string;
  /** Other activities `am start -n` accepts, mapped to their screen. */
  activities: Record<string, string>;
  screen(name: string, context: ScreenContext): ScreenSpec | undefined;
}
