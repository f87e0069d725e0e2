-- Argo CD health check for sparkdlq.io/DeadLetterRedrive (Lua 5.1, as Argo CD runs it).
-- Install: deploy/argocd/README.md (argocd-cm key
-- resource.customizations.health.sparkdlq.io_DeadLetterRedrive).
--
--   Progressing  no status yet, or phase Pending or Running
--   Healthy      phase Succeeded (the message has the counts)
--   Degraded     phase Failed (the message says why)
--   Suspended    phase Cancelled (spec.suspend: true)
local hs = {}

-- The condition that says why: Failed once it failed or was cancelled, else Running (whose
-- reason says why a Pending redrive waits). Complete and Failed are as a batch/v1 Job's.
local function explaining(status)
  if status.conditions == nil then
    return nil
  end
  local running = nil
  for _, c in ipairs(status.conditions) do
    if c.type == "Failed" and c.status == "True" then
      return c
    end
    if c.type == "Running" then
      running = c
    end
  end
  return running
end

local status = obj.status
if status == nil or status.phase == nil then
  hs.status = "Progressing"
  hs.message = "Waiting for the spark-dlq operator to pick up the redrive"
  return hs
end

local c = explaining(status)
local message = "Phase " .. status.phase
if c ~= nil and c.message ~= nil and c.message ~= "" then
  message = c.reason .. ": " .. c.message
end

if status.phase == "Succeeded" then
  hs.status = "Healthy"
  hs.message = "Redriven " .. tostring(status.redriven or 0) .. " of " .. tostring(status.matched or 0)
    .. " matched dead letters"
  return hs
end
if status.phase == "Failed" then
  hs.status = "Degraded"
  hs.message = message
  return hs
end
if status.phase == "Cancelled" then
  hs.status = "Suspended"
  hs.message = message
  return hs
end
hs.status = "Progressing"
hs.message = message
return hs
