-- The health of a child Application (app of apps): what Argo CD reports for it. Argo CD
-- stopped assessing Applications by default in 1.8; sync waves between them need it back.
local hs = {status = "Progressing", message = ""}
if obj.status ~= nil and obj.status.health ~= nil then
  hs.status = obj.status.health.status
  if obj.status.health.message ~= nil then
    hs.message = obj.status.health.message
  end
end
return hs
