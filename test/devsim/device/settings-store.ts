export type SettingsNamespace = "system" | "secure" | "global";

const DEFAULTS: Record<SettingsNamespace, Record<string, string>> = {
  system: { accelerometer_rotation: "0", user_rotation: "0", screen_brightness: "102", screen_off_timeout: "60000", font_scale: "1.0" },
  secure: { android_id: "", default_input_method: "com.google.android.inputmethod.latin/com.android.inputmethod.latin.LatinIME", location_mode: "3" },
  global: { adb_enabled: "1", airplane_mode_on: "0", development_settings_enabled: "1", stay_on_while_plugged_in: "0", window_animation_scale: "1.0", transition_animation_scale: "1.0", animator_duration_scale: "1.0", device_name: "" },
};

/** `settings get|put|delete|list` storage: three namespaces of string values. */
export class SettingsStore {
  private readonly data = new Map<SettingsNamespace, Map<string, string>>();
  /** Called after every put, e.g. so user_rotation turns the display. */
  onChange: (namespace: SettingsNamespace, key: string, value: string | undefined) => void = () => {};

  constructor(overrides: Partial<Record<SettingsNamespace, Record<string, string>>> = {}) {
    for (const namespace of ["system", "secure", "global"] as const) {
      this.data.set(namespace, new Map(Object.entries({ ...DEFAULTS[namespace], ...overrides[namespace] })));
    }
  }

  get(namespace: SettingsNamespace, key: string): string | undefined {
    return this.data.get(namespace)!.get(key);
  }

  put(namespace: SettingsNamespace, key: string, value: string): void {
    this.data.get(namespace)!.set(key, value);
    this.onChange(namespace, key, value);
  }

  delete(namespace: SettingsNamespace, key: string): boolean {
    const deleted = this.data.get(namespace)!.delete(key);
    if (deleted) this.onChange(namespace, key, undefined);
    return deleted;
  }

  list(namespace: SettingsNamespace): Array<[string, string]> {
    return [...this.data.get(namespace)!.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
  }
}

export function isNamespace(text: string | undefined): text is SettingsNamespace {
  return text === "system" || text === "secure" || text === "global";
}
